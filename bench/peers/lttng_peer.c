/* The LTTng-UST peer of icxtrace for bench/peers.sh: a preload that wraps the same three calls the
 * way icxtrace does (cudaMemcpyPeerAsync and ncclAllReduce by symbol, ibv_post_send by swapping
 * the context's ops.post_send in ibv_open_device) and emits one LTTng-UST tracepoint per call with
 * the same fields, as LTTng's documentation sets up an application's own provider
 * (LTTNG_UST_TRACEPOINT_CREATE_PROBES in the provider's object, linked with -llttng-ust).  What
 * is recorded, and where, is the session's: bench/peers.sh creates a per-UID session recording to
 * disk. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <nccl.h>
#include <x86intrin.h>

#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "lttng_peer_tp.h"

#define API __attribute__((visibility("default")))

typedef cudaError_t (*copy_fn)(void *, int, const void *, int, size_t, cudaStream_t);
typedef ncclResult_t (*allreduce_fn)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                                     ncclComm_t, cudaStream_t);
typedef struct ibv_context *(*open_fn)(struct ibv_device *);
typedef int (*post_send_fn)(struct ibv_qp *, struct ibv_send_wr *, struct ibv_send_wr **);

static copy_fn real_copy;
static allreduce_fn real_allreduce;
static open_fn real_open;
static post_send_fn real_post_send; /* the provider's (one context in the benchmark) */

API cudaError_t cudaMemcpyPeerAsync(void *d, int dd, const void *s, int sd, size_t n,
                                    cudaStream_t st)
{
    if (__builtin_expect(!real_copy, 0))
        real_copy = (copy_fn)dlsym(RTLD_NEXT, "cudaMemcpyPeerAsync");
    uint64_t t0 = __rdtsc();
    cudaError_t rc = real_copy(d, dd, s, sd, n, st);
    lttng_ust_tracepoint(icxpeer, copy, t0, sd, dd, n, (uint64_t)(uintptr_t)st, rc);
    return rc;
}

API ncclResult_t ncclAllReduce(const void *s, void *r, size_t count, ncclDataType_t dt,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t st)
{
    if (__builtin_expect(!real_allreduce, 0))
        real_allreduce = (allreduce_fn)dlsym(RTLD_NEXT, "ncclAllReduce");
    uint64_t t0 = __rdtsc();
    ncclResult_t rc = real_allreduce(s, r, count, dt, op, comm, st);
    lttng_ust_tracepoint(icxpeer, allreduce, t0, count, dt, op, (uint64_t)(uintptr_t)comm,
                         (uint64_t)(uintptr_t)st, rc);
    return rc;
}

static int traced_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    uint64_t t0 = __rdtsc();
    int rc = real_post_send(qp, wr, bad);
    for (struct ibv_send_wr *w = wr; w; w = w->next) {
        uint64_t bytes = 0;
        for (int i = 0; i < w->num_sge; i++)
            bytes += w->sg_list[i].length;
        lttng_ust_tracepoint(icxpeer, post_send, t0, qp->qp_num, w->opcode, bytes, w->wr_id, rc);
    }
    return rc;
}

API struct ibv_context *ibv_open_device(struct ibv_device *dev)
{
    if (!real_open)
        real_open = (open_fn)dlvsym(RTLD_NEXT, "ibv_open_device", "IBVERBS_1.1");
    struct ibv_context *c = real_open ? real_open(dev) : NULL;
    if (c && c->ops.post_send != traced_post_send) {
        real_post_send = c->ops.post_send;
        c->ops.post_send = traced_post_send;
    }
    return c;
}
