/* NCCL collectives, point-to-point calls and groups: each call is recorded on entry (so a call
 * that never returns, a hang, is in the trace) and on return, with its communicator's sequence
 * number (nccl_comm.c) and, outside a group, its GPU span from pooled events on its stream (gpu.c).
 * Calls in a group are timed together around the outermost ncclGroupEnd, on every stream the group
 * used. */
#include <string.h>

#include "gpu.h"
#include "hook.h"
#include "nccl_coll.h"
#include "nccl_comm.h"
#include "nccl_real.h"
#include "stack.h"
#include "tbuf.h"

ICX_TLS int icx_nccl_guard;
static _Atomic uint32_t icx_group_ids;
static ICX_TLS int icx_group_depth;
static ICX_TLS uint32_t icx_group_id;
#define ICX_GROUP_STREAMS 8 /* streams timed per group; more are counted as lost timing */
static ICX_TLS cudaStream_t icx_group_streams[ICX_GROUP_STREAMS];
static ICX_TLS int icx_group_nstreams;

ICX_NCCL_DECL(ncclAllReduce, (const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                              cudaStream_t));
ICX_NCCL_DECL(ncclBroadcast,
              (const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t));
ICX_NCCL_DECL(ncclBcast, (void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t));
ICX_NCCL_DECL(ncclReduce, (const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, int,
                           ncclComm_t, cudaStream_t));
ICX_NCCL_DECL(ncclAllGather,
              (const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t));
ICX_NCCL_DECL(ncclReduceScatter, (const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                                  ncclComm_t, cudaStream_t));
ICX_NCCL_DECL(ncclAlltoAll,
              (const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t));
ICX_NCCL_DECL(ncclGather,
              (const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t));
ICX_NCCL_DECL(ncclScatter,
              (const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t));
ICX_NCCL_DECL(ncclSend, (const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t));
ICX_NCCL_DECL(ncclRecv, (void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t));
ICX_NCCL_DECL(ncclGroupStart, (void));
ICX_NCCL_DECL(ncclGroupEnd, (void));
ICX_NCCL_DECL(ncclGroupSimulateEnd, (ncclSimInfo_t *));

ncclResult_t ncclGroupStart(void); /* nccl.h declares them without a prototype */
ncclResult_t ncclGroupEnd(void);

static size_t icx_nccl_dtsize(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
    default: return 1; /* fp8 formats */
    }
}

/* pending: written on entry (ICX_EVF_PENDING, no result yet); else on return. */
static void icx_rec_call(enum icx_api api, uint64_t t0, int pending, ncclComm_t h, size_t count,
                         int dt, int redop, int peer, uint64_t seq, cudaStream_t st,
                         ncclResult_t rc, uint32_t gpu_id)
{
    struct icx_slot slot;
    struct icx_rec_nccl_call *r = icx_reserve(sizeof(*r), &slot);
    if (!r)
        return;
    memset(r, 0, sizeof(*r));
    r->e.h.type = ICX_REC_NCCL_CALL;
    r->e.h.size = sizeof(*r);
    r->e.h.aux = api | (pending ? ICX_EVF_PENDING << ICX_EVF_SHIFT : 0);
    r->e.ts = (int64_t)t0;
    r->e.dur = pending ? 0 : icx_ticks() - t0;
    r->comm = (uintptr_t)h;
    r->count = count;
    r->bytes = dt >= 0 ? count * icx_nccl_dtsize((ncclDataType_t)dt) : 0;
    r->stream = (uintptr_t)st;
    r->seq = seq;
    r->peer = peer;
    r->dtype = (uint8_t)(dt < 0 ? 0xff : dt);
    r->redop = (uint8_t)(redop < 0 ? 0xff : redop);
    r->group = icx_group_depth ? icx_group_id : 0;
    r->result = pending ? 0 : rc;
    r->gpu_id = gpu_id;
    icx_commit(&slot);
}

void icx_nccl_rec_other(enum icx_api api, uint64_t t0, ncclComm_t cm, size_t count, int dt,
                        ncclResult_t rc)
{
    icx_rec_call(api, t0, 0, cm, count, dt, -1, -1, 0, NULL, rc, 0);
}

/* ---- collectives and point-to-point ---- */

static int icx_nccl_gpu_on(void)
{
    return icx_cfg.gpu_timing != ICX_GPUT_OFF;
}

/* NCCL's result as the CUDA result gpu.c wants: did the call enqueue its work? */
static cudaError_t icx_nccl_enqueued(ncclResult_t rc)
{
    return rc == ncclSuccess || rc == ncclInProgress ? cudaSuccess : cudaErrorUnknown;
}

/* A call inside a group: its stream is timed when the group is launched. */
static void icx_group_note_stream(cudaStream_t s)
{
    for (int i = 0; i < icx_group_nstreams; i++)
        if (icx_group_streams[i] == s)
            return;
    if (icx_group_nstreams < ICX_GROUP_STREAMS)
        icx_group_streams[icx_group_nstreams++] = s;
    else
        icx_count_lost(ICX_LOST_gpu_timing_pool);
}

/* One collective or point-to-point call: the bracket (hook.h), its entry record, its sequence
 * number and, outside a group, its GPU timing. */
struct icx_ncoll {
    struct icx_call call;
    enum icx_api api;
    ncclComm_t comm;
    size_t count;
    int dt, redop, peer, timed;
    uint64_t seq;
    cudaStream_t stream;
    struct icx_gpu_req gpu;
};

/* Call stacks of NCCL calls, for the mismatch evidence: a thread's stack is taken the first time
 * it makes a call of a new shape (op, communicator, count, type, reduction, root or peer) -- a
 * training loop repeats a few shapes, and a call that differs from the other ranks' is, on its
 * own rank, a new one -- at most ICX_NCCL_STACKS_PER_S a second per thread.  The shapes seen are
 * a direct-mapped per-thread table of hashes: a collision only costs a second stack. */
#define ICX_NCCL_SHAPES 256
#define ICX_NCCL_STACKS_PER_S 64
static ICX_TLS uint32_t icx_nccl_shapes[ICX_NCCL_SHAPES];
static ICX_TLS uint64_t icx_nccl_stack_window; /* tick the current second began */
static ICX_TLS unsigned icx_nccl_stack_used;

static int icx_nccl_shape_new(const struct icx_ncoll *k)
{
    uint64_t h = (uint64_t)k->api * 0x9e3779b97f4a7c15ull ^ (uintptr_t)k->comm;
    h = (h ^ k->count) * 0xff51afd7ed558ccdull;
    h = (h ^ ((uint64_t)(uint32_t)k->dt << 40 ^ (uint64_t)(uint32_t)k->redop << 20 ^
              (uint32_t)k->peer)) *
        0xc4ceb9fe1a85ec53ull;
    uint32_t tag = (uint32_t)(h >> 32) | 1, *slot = &icx_nccl_shapes[h % ICX_NCCL_SHAPES];
    if (*slot == tag)
        return 0;
    uint64_t now = k->call.t0, second = 1000000ull * icx_ticks_per_us;
    if (now - icx_nccl_stack_window > second) {
        icx_nccl_stack_window = now;
        icx_nccl_stack_used = 0;
    }
    if (icx_nccl_stack_used >= ICX_NCCL_STACKS_PER_S)
        return 0; /* not remembered: its stack is taken when the budget allows */
    icx_nccl_stack_used++;
    *slot = tag;
    return 1;
}

/* 1: traced (the entry record is written); 0: pass the call straight through.  p2p_dir: -1 a
 * collective, 0 a send, 1 a receive. */
static inline __attribute__((always_inline)) int
icx_ncoll_begin(struct icx_ncoll *k, enum icx_api api, ncclComm_t comm, size_t count, int dt,
                int redop, int peer, int p2p_dir, cudaStream_t stream)
{
    if (!icx_call_begin(&k->call, &icx_nccl_guard))
        return 0;
    k->api = api;
    k->comm = comm;
    k->count = count;
    k->dt = dt;
    k->redop = redop;
    k->peer = peer;
    k->timed = 0;
    k->stream = stream;
    k->seq = icx_ncomm_next_seq(comm, peer, p2p_dir);
    icx_rec_call(api, k->call.t0, 1, comm, count, dt, redop, peer, k->seq, stream, ncclSuccess, 0);
    if (icx_cfg.stack_control && icx_nccl_shape_new(k))
        icx_stack_capture(); /* STACK_REF after the entry record */
    if (icx_group_depth)
        icx_group_note_stream(stream);
    else if (icx_nccl_gpu_on())
        k->timed = icx_gpu_begin(&k->gpu, stream);
    return 1;
}

/* Right after the real call: its return record; returns rc untouched. */
static inline __attribute__((always_inline)) ncclResult_t icx_ncoll_end(struct icx_ncoll *k,
                                                                        ncclResult_t rc)
{
    icx_call_returned(&k->call);
    uint32_t gid = k->timed ? icx_gpu_end_as(&k->gpu, k->stream, icx_nccl_enqueued(rc), 0) : 0;
    icx_rec_call(k->api, k->call.t0, 0, k->comm, k->count, k->dt, k->redop, k->peer, k->seq,
                 k->stream, rc, gid);
    icx_call_end(&k->call);
    return rc;
}

ICX_EXPORT ncclResult_t ncclAllReduce(const void *sb, void *rb, size_t n, ncclDataType_t t,
                                      ncclRedOp_t op, ncclComm_t cm, cudaStream_t s)
{
    icx_real_ncclAllReduce_t real = ICX_NCCL_REAL(ncclAllReduce);
    struct icx_ncoll k;
    if (!real)
        return ncclSystemError;
    if (!icx_ncoll_begin(&k, ICX_API_ncclAllReduce, cm, n, (int)t, (int)op, -1, -1, s))
        return real(sb, rb, n, t, op, cm, s);
    return icx_ncoll_end(&k, real(sb, rb, n, t, op, cm, s));
}

ICX_EXPORT ncclResult_t ncclBroadcast(const void *sb, void *rb, size_t n, ncclDataType_t t,
                                      int root, ncclComm_t cm, cudaStream_t s)
{
    icx_real_ncclBroadcast_t real = ICX_NCCL_REAL(ncclBroadcast);
    struct icx_ncoll k;
    if (!real)
        return ncclSystemError;
    if (!icx_ncoll_begin(&k, ICX_API_ncclBroadcast, cm, n, (int)t, -1, root, -1, s))
        return real(sb, rb, n, t, root, cm, s);
    return icx_ncoll_end(&k, real(sb, rb, n, t, root, cm, s));
}

ICX_EXPORT ncclResult_t ncclBcast(void *b, size_t n, ncclDataType_t t, int root, ncclComm_t cm,
                                  cudaStream_t s)
{
    icx_real_ncclBcast_t real = ICX_NCCL_REAL(ncclBcast);
    struct icx_ncoll k;
    if (!real)
        return ncclSystemError;
    if (!icx_ncoll_begin(&k, ICX_API_ncclBcast, cm, n, (int)t, -1, root, -1, s))
        return real(b, n, t, root, cm, s);
    return icx_ncoll_end(&k, real(b, n, t, root, cm, s));
}

ICX_EXPORT ncclResult_t ncclReduce(const void *sb, void *rb, size_t n, ncclDataType_t t,
                                   ncclRedOp_t op, int root, ncclComm_t cm, cudaStream_t s)
{
    icx_real_ncclReduce_t real = ICX_NCCL_REAL(ncclReduce);
    struct icx_ncoll k;
    if (!real)
        return ncclSystemError;
    if (!icx_ncoll_begin(&k, ICX_API_ncclReduce, cm, n, (int)t, (int)op, root, -1, s))
        return real(sb, rb, n, t, op, root, cm, s);
    return icx_ncoll_end(&k, real(sb, rb, n, t, op, root, cm, s));
}

ICX_EXPORT ncclResult_t ncclAllGather(const void *sb, void *rb, size_t n, ncclDataType_t t,
                                      ncclComm_t cm, cudaStream_t s)
{
    icx_real_ncclAllGather_t real = ICX_NCCL_REAL(ncclAllGather);
    struct icx_ncoll k;
    if (!real)
        return ncclSystemError;
    if (!icx_ncoll_begin(&k, ICX_API_ncclAllGather, cm, n, (int)t, -1, -1, -1, s))
        return real(sb, rb, n, t, cm, s);
    return icx_ncoll_end(&k, real(sb, rb, n, t, cm, s));
}

ICX_EXPORT ncclResult_t ncclReduceScatter(const void *sb, void *rb, size_t n, ncclDataType_t t,
                                          ncclRedOp_t op, ncclComm_t cm, cudaStream_t s)
{
    icx_real_ncclReduceScatter_t real = ICX_NCCL_REAL(ncclReduceScatter);
    struct icx_ncoll k;
    if (!real)
        return ncclSystemError;
    if (!icx_ncoll_begin(&k, ICX_API_ncclReduceScatter, cm, n, (int)t, (int)op, -1, -1, s))
        return real(sb, rb, n, t, op, cm, s);
    return icx_ncoll_end(&k, real(sb, rb, n, t, op, cm, s));
}

ICX_EXPORT ncclResult_t ncclAlltoAll(const void *sb, void *rb, size_t n, ncclDataType_t t,
                                     ncclComm_t cm, cudaStream_t s)
{
    icx_real_ncclAlltoAll_t real = ICX_NCCL_REAL(ncclAlltoAll);
    struct icx_ncoll k;
    if (!real)
        return ncclSystemError;
    if (!icx_ncoll_begin(&k, ICX_API_ncclAlltoAll, cm, n, (int)t, -1, -1, -1, s))
        return real(sb, rb, n, t, cm, s);
    return icx_ncoll_end(&k, real(sb, rb, n, t, cm, s));
}

ICX_EXPORT ncclResult_t ncclGather(const void *sb, void *rb, size_t n, ncclDataType_t t, int root,
                                   ncclComm_t cm, cudaStream_t s)
{
    icx_real_ncclGather_t real = ICX_NCCL_REAL(ncclGather);
    struct icx_ncoll k;
    if (!real)
        return ncclSystemError;
    if (!icx_ncoll_begin(&k, ICX_API_ncclGather, cm, n, (int)t, -1, root, -1, s))
        return real(sb, rb, n, t, root, cm, s);
    return icx_ncoll_end(&k, real(sb, rb, n, t, root, cm, s));
}

ICX_EXPORT ncclResult_t ncclScatter(const void *sb, void *rb, size_t n, ncclDataType_t t, int root,
                                    ncclComm_t cm, cudaStream_t s)
{
    icx_real_ncclScatter_t real = ICX_NCCL_REAL(ncclScatter);
    struct icx_ncoll k;
    if (!real)
        return ncclSystemError;
    if (!icx_ncoll_begin(&k, ICX_API_ncclScatter, cm, n, (int)t, -1, root, -1, s))
        return real(sb, rb, n, t, root, cm, s);
    return icx_ncoll_end(&k, real(sb, rb, n, t, root, cm, s));
}

ICX_EXPORT ncclResult_t ncclSend(const void *sb, size_t n, ncclDataType_t t, int peer,
                                 ncclComm_t cm, cudaStream_t s)
{
    icx_real_ncclSend_t real = ICX_NCCL_REAL(ncclSend);
    struct icx_ncoll k;
    if (!real)
        return ncclSystemError;
    if (!icx_ncoll_begin(&k, ICX_API_ncclSend, cm, n, (int)t, -1, peer, 0, s))
        return real(sb, n, t, peer, cm, s);
    return icx_ncoll_end(&k, real(sb, n, t, peer, cm, s));
}

ICX_EXPORT ncclResult_t ncclRecv(void *rb, size_t n, ncclDataType_t t, int peer, ncclComm_t cm,
                                 cudaStream_t s)
{
    icx_real_ncclRecv_t real = ICX_NCCL_REAL(ncclRecv);
    struct icx_ncoll k;
    if (!real)
        return ncclSystemError;
    if (!icx_ncoll_begin(&k, ICX_API_ncclRecv, cm, n, (int)t, -1, peer, 1, s))
        return real(rb, n, t, peer, cm, s);
    return icx_ncoll_end(&k, real(rb, n, t, peer, cm, s));
}

/* ---- groups ---- */

ICX_EXPORT ncclResult_t ncclGroupStart(void)
{
    icx_real_ncclGroupStart_t real = ICX_NCCL_REAL(ncclGroupStart);
    struct icx_call c;
    if (!real)
        return ncclSystemError;
    if (!icx_call_begin_untimed(&c, &icx_nccl_guard))
        return real();
    ncclResult_t rc = real();
    icx_call_returned(&c);
    if (rc == ncclSuccess && icx_group_depth++ == 0) {
        icx_group_id = atomic_fetch_add_explicit(&icx_group_ids, 1, memory_order_relaxed) + 1;
        icx_group_nstreams = 0;
    }
    icx_call_end(&c);
    return rc;
}

/* The outermost end launches the group: it is recorded and timed on every stream the group's
 * calls named, all spans with one id. */
ICX_EXPORT ncclResult_t ncclGroupEnd(void)
{
    icx_real_ncclGroupEnd_t real = ICX_NCCL_REAL(ncclGroupEnd);
    struct icx_call c;
    if (!real)
        return ncclSystemError;
    if (!icx_call_begin(&c, &icx_nccl_guard))
        return real();
    if (icx_group_depth == 0) { /* no ncclGroupStart of ours: NCCL refuses it; say so if it does */
        ncclResult_t rc = real();
        icx_call_returned(&c);
        if (rc != ncclSuccess)
            icx_rec_call(ICX_API_ncclGroupEnd, c.t0, 0, NULL, 0, -1, -1, -1, 0, NULL, rc, 0);
        icx_call_end(&c);
        return rc;
    }
    int outer = icx_group_depth == 1;
    struct icx_gpu_req g[ICX_GROUP_STREAMS];
    int timed[ICX_GROUP_STREAMS] = {0}, ns = outer ? icx_group_nstreams : 0;
    if (outer) {
        icx_rec_call(ICX_API_ncclGroupEnd, c.t0, 1, NULL, 0, -1, -1, -1, 0, NULL, ncclSuccess, 0);
        for (int i = 0; i < ns && icx_nccl_gpu_on(); i++)
            timed[i] = icx_gpu_begin(&g[i], icx_group_streams[i]);
    }
    ncclResult_t rc = real();
    icx_call_returned(&c);
    if (outer) {
        uint32_t gid = 0;
        for (int i = 0; i < ns; i++)
            if (timed[i]) {
                uint32_t got =
                    icx_gpu_end_as(&g[i], icx_group_streams[i], icx_nccl_enqueued(rc), gid);
                gid = gid ? gid : got;
            }
        icx_rec_call(ICX_API_ncclGroupEnd, c.t0, 0, NULL, 0, -1, -1, -1, 0,
                     ns ? icx_group_streams[0] : NULL, rc, gid);
        icx_group_nstreams = 0;
    }
    icx_group_depth--;
    icx_call_end(&c);
    return rc;
}

/* Ends a group without launching it: the group is over for our bookkeeping too. */
ICX_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *info)
{
    icx_real_ncclGroupSimulateEnd_t real = ICX_NCCL_REAL(ncclGroupSimulateEnd);
    struct icx_call c;
    if (!real)
        return ncclSystemError;
    if (!icx_call_begin_untimed(&c, &icx_nccl_guard))
        return real(info);
    ncclResult_t rc = real(info);
    icx_call_returned(&c);
    if (icx_group_depth > 0 && --icx_group_depth == 0)
        icx_group_nstreams = 0;
    icx_call_end(&c);
    return rc;
}

void icx_nccl_groups_fork_child(void)
{
    icx_group_depth = 0;
    icx_group_nstreams = 0;
}
