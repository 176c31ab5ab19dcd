/* libicxtrace.so as NCCL's profiler plugin (interface v4, v5, v6: include/icx/nccl_profiler_abi.h):
 * NCCL's own view from inside -- per collective the algorithm, protocol, channels and warps it
 * chose, per kernel channel the GPU's own start and stop timers.
 *
 * Found by NCCL.  The exported tables ncclProfiler_v6, _v5 and _v4 are in the global scope (the
 * preload comes first), so NCCL_PROFILER_PLUGIN=STATIC_PLUGIN (dlopen(NULL)) finds them: the
 * constructor sets that when the user set no NCCL_PROFILER_PLUGIN (ICX_NCCL_PROFILER=0: not).
 * When the user named a plugin of their own, the environment is left alone: NCCL dlopen()s it and
 * looks its table up with dlsym, which the tracer interposes (dl.c) -- the lookup returns the
 * tracer's table of the same version instead, and every call is forwarded to the user's (chained:
 * its activation mask is added to ours, its handles kept inside ours, parents translated).
 *
 * Recorded into the calling thread's ring (NCCL calls from its API threads, its proxy thread, and
 * the simulated library from its stream workers): NCCL_PCOMM at init, NCCL_PCOLL at a
 * collective's stop (NCCL's "enqueued"), NCCL_PKCH at a kernel channel's stop.  Collective
 * handles live in a fixed ring of ICX_NPROF_COLLS slots reused in turn, as NCCL's example plugin
 * pools them: NCCL hands a collective's handle to its kernel channels after the collective's own
 * stop, with no event saying when the last one is done.  A channel is named after its collective
 * when it starts; a channel starting after ICX_NPROF_COLLS later collectives would be misnamed. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlreal.h"
#include "frame.h"
#include "icx/nccl_profiler_abi.h"
#include "nccl_prof.h"
#include "tbuf.h"

#define ICX_NPROF_COLLS 8192
#define ICX_NPROF_MASK                                                                             \
    (ICX_NPROF_COLL | ICX_NPROF_KERNEL_CH | ICX_NPROF_PROXY_OP | ICX_NPROF_PROXY_STEP)

enum { H_COLL = 1, H_KCH, H_PASS, H_OP, H_STEP };

struct icx_nprof_ctx {
    uint32_t id;
    int version;
    void *user_ctx;
    int chained;   /* the chained plugin's init succeeded: it gets finalize */
    int user_mask; /* the events it asked for */
};

struct icx_nph { /* every handle given to NCCL starts so */
    uint8_t kind;
    struct icx_nprof_ctx *ctx;
    void *user; /* the chained plugin's handle of the same event */
};

struct icx_nph_coll {
    struct icx_nph h;
    struct icx_rec_nccl_pcoll rec; /* filled at start, written at stop */
};

struct icx_nph_kch {
    struct icx_nph h;
    struct icx_rec_nccl_pkch rec;
};

/* A proxy operation (one peer, one channel, one direction) and its steps: the steps' bytes and
 * the time they spent in each state, folded into icx_nproxy[] when each stops. */
struct icx_nph_op {
    struct icx_nph h;
    int32_t peer;
    uint8_t channel, is_send;
};

enum { W_GPU, W_PEER, W_NET, W_NONE };
struct icx_nph_step {
    struct icx_nph h;
    int32_t peer;
    uint8_t channel, is_send;
    int in;           /* W_*: what the step is waiting for now */
    uint64_t since;   /* ns, when it began to */
    uint64_t wait[3]; /* ns per W_* */
    uint64_t bytes;   /* its transSize */
};

/* Per (context, channel, peer, direction) since the start: written each flush when it moved, so
 * records are cumulative and the last one of a key is its total (NCCL_PPROXY). */
#define ICX_NPROXY_SLOTS 4096
struct icx_nproxy {
    uint32_t ctx; /* 0: free */
    int32_t peer;
    uint8_t channel, is_send, dirty;
    uint64_t ops, steps, bytes, wait[3];
};
static struct icx_nproxy icx_nproxy[ICX_NPROXY_SLOTS];
static pthread_mutex_t icx_nproxy_lock = PTHREAD_MUTEX_INITIALIZER;

/* The slot of a key, made when missing (NULL: the table is full; counted). Lock held. */
static struct icx_nproxy *icx_nproxy_slot(uint32_t ctx, uint8_t channel, int32_t peer,
                                          uint8_t is_send)
{
    uint64_t h = ((uint64_t)ctx * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)channel << 40) ^
                 ((uint64_t)(uint32_t)peer << 8) ^ is_send;
    h *= 0xff51afd7ed558ccdull;
    for (unsigned i = 0; i < ICX_NPROXY_SLOTS; i++) {
        struct icx_nproxy *e = &icx_nproxy[(h + i) % ICX_NPROXY_SLOTS];
        if (!e->ctx) {
            *e = (struct icx_nproxy){ctx, peer, channel, is_send, 0, 0, 0, 0, {0, 0, 0}};
            return e;
        }
        if (e->ctx == ctx && e->channel == channel && e->peer == peer && e->is_send == is_send)
            return e;
    }
    icx_count_lost(ICX_LOST_nccl_proxy_full);
    return NULL;
}

static void icx_nproxy_add(uint32_t ctx, uint8_t channel, int32_t peer, uint8_t is_send,
                           uint64_t ops, const struct icx_nph_step *st)
{
    pthread_mutex_lock(&icx_nproxy_lock);
    struct icx_nproxy *e = icx_nproxy_slot(ctx, channel, peer, is_send);
    if (e) {
        e->ops += ops;
        if (st) {
            e->steps++;
            e->bytes += st->bytes;
            for (int k = 0; k < 3; k++)
                e->wait[k] += st->wait[k];
        }
        e->dirty = 1;
    }
    pthread_mutex_unlock(&icx_nproxy_lock);
}

static struct icx_nph_coll icx_colls[ICX_NPROF_COLLS];
static _Atomic uint32_t icx_next_coll, icx_next_ctx;

/* The chained plugin: one per process (NCCL loads one), found through dlsym. */
static const icx_nprof_v5_t *_Atomic icx_user5;
static const icx_nprof_v4_t *_Atomic icx_user4;

static int icx_nprof_recording(void)
{
    return icx_cfg.nccl_profiler && atomic_load_explicit(&icx_active, memory_order_relaxed);
}

static void icx_copy_name(char out[16], const char *s)
{
    memset(out, 0, 16);
    if (s)
        strncpy(out, s, 15);
}

/* ---- the calls, shared by every version ---- */

static ncclResult_t icx_nprof_init(int version, void **context, uint64_t comm_id, int *mask,
                                   const char *name, int nnodes, int nranks, int rank,
                                   icx_nccl_logger_t logfn)
{
    struct icx_nprof_ctx *c = calloc(1, sizeof(*c));
    *mask = 0;
    *context = c;
    if (!c)
        return ncclSuccess; /* no events for this communicator; NCCL goes on */
    c->version = version;
    c->id = atomic_fetch_add(&icx_next_ctx, 1) + 1;
    const icx_nprof_v5_t *u5 = atomic_load(&icx_user5);
    const icx_nprof_v4_t *u4 = atomic_load(&icx_user4);
    int um = 0;
    ncclResult_t urc = ncclInternalError;
    if (version >= 5 && u5)
        urc = u5->init(&c->user_ctx, comm_id, &um, name, nnodes, nranks, rank, logfn);
    else if (version == 4 && u4)
        urc = u4->init(&c->user_ctx, &um, name, comm_id, nnodes, nranks, rank, logfn);
    c->chained = urc == ncclSuccess;
    c->user_mask = c->chained ? um : 0;
    int ours = icx_nprof_recording() ? ICX_NPROF_MASK : 0;
    *mask = ours | c->user_mask;
    if (ours) {
        struct icx_slot slot;
        struct icx_rec_nccl_pcomm *r = icx_reserve(sizeof(*r), &slot);
        if (r) {
            memset(r, 0, sizeof(*r));
            r->h.type = ICX_REC_NCCL_PCOMM;
            r->h.size = sizeof(*r);
            r->h.aux = c->id;
            r->nccl_comm_id = comm_id;
            r->rank = rank;
            r->nranks = nranks;
            r->nnodes = nnodes;
            r->version = (uint8_t)version;
            r->chained = (uint8_t)c->chained;
            r->mask = (uint32_t)*mask;
            icx_commit(&slot);
        }
    }
    return ncclSuccess;
}

/* The chained plugin's start of the same event, its parent translated to its own handle. */
static void *icx_user_start(struct icx_nprof_ctx *c, void *descr, uint64_t type)
{
    if (!(c->user_mask & (int)type))
        return NULL;
    void *uh = NULL;
    if (c->version >= 5) {
        icx_nprof_descr_v5_t *d = descr;
        void *parent = d->parentObj;
        d->parentObj = parent ? ((struct icx_nph *)parent)->user : NULL;
        atomic_load(&icx_user5)->startEvent(c->user_ctx, &uh, d);
        d->parentObj = parent;
    } else {
        icx_nprof_descr_v4_t *d = descr;
        void *parent = d->parentObj;
        d->parentObj = parent ? ((struct icx_nph *)parent)->user : NULL;
        atomic_load(&icx_user4)->startEvent(c->user_ctx, &uh, d);
        d->parentObj = parent;
    }
    return uh;
}

static ncclResult_t icx_nprof_start(void *context, void **handle, void *descr, uint64_t type,
                                    void *parent_obj, const struct icx_nprof_coll *coll,
                                    const struct icx_nprof_kernel_ch *kch)
{
    struct icx_nprof_ctx *c = context;
    *handle = NULL;
    if (!c)
        return ncclSuccess;
    void *uh = icx_user_start(c, descr, type);
    int ours = icx_nprof_recording();
    if (ours && type == ICX_NPROF_COLL) {
        uint32_t i = atomic_fetch_add(&icx_next_coll, 1) % ICX_NPROF_COLLS;
        struct icx_nph_coll *h = &icx_colls[i];
        h->h = (struct icx_nph){H_COLL, c, uh};
        struct icx_rec_nccl_pcoll *r = &h->rec;
        memset(r, 0, sizeof(*r));
        r->e.h.type = ICX_REC_NCCL_PCOLL;
        r->e.h.size = sizeof(*r);
        r->e.h.aux = ICX_API_ncclProfiler;
        r->e.ts = (int64_t)icx_ticks();
        r->ctx = c->id;
        r->root = coll->root;
        r->seq = coll->seqNumber;
        r->count = coll->count;
        r->nchannels = coll->nChannels;
        r->nwarps = coll->nWarps;
        icx_copy_name(r->func, coll->func);
        icx_copy_name(r->algo, coll->algo);
        icx_copy_name(r->proto, coll->proto);
        *handle = h;
        return ncclSuccess;
    }
    if (ours && type == ICX_NPROF_KERNEL_CH) {
        struct icx_nph_kch *h = calloc(1, sizeof(*h));
        if (h) {
            const struct icx_nph *p = parent_obj;
            h->h = (struct icx_nph){H_KCH, c, uh};
            h->rec.e.h.type = ICX_REC_NCCL_PKCH;
            h->rec.e.h.size = sizeof(h->rec);
            h->rec.e.h.aux = ICX_API_ncclProfiler;
            h->rec.ctx = c->id;
            h->rec.channel = kch->channelId;
            h->rec.seq =
                p && p->kind == H_COLL ? ((const struct icx_nph_coll *)p)->rec.seq : UINT64_MAX;
            h->rec.gpu_start = kch->pTimer;
            *handle = h;
            return ncclSuccess;
        }
    }
    if (ours && type == ICX_NPROF_PROXY_OP) {
        const struct icx_nprof_proxy_op *op = &((icx_nprof_descr_v5_t *)descr)->proxyOp;
        struct icx_nph_op *h = malloc(sizeof(*h));
        if (h) { /* the proxyOp member sits at the same place in v4's descriptor */
            *h =
                (struct icx_nph_op){{H_OP, c, uh}, op->peer, op->channelId, (uint8_t) !!op->isSend};
            *handle = h;
            return ncclSuccess;
        }
    }
    if (ours && type == ICX_NPROF_PROXY_STEP) {
        const struct icx_nph *p = parent_obj;
        struct icx_nph_step *h = calloc(1, sizeof(*h));
        if (h && p && p->kind == H_OP) {
            const struct icx_nph_op *op = parent_obj;
            h->h = (struct icx_nph){H_STEP, c, uh};
            h->peer = op->peer;
            h->channel = op->channel;
            h->is_send = op->is_send;
            h->in = W_NONE;
            *handle = h;
            return ncclSuccess;
        }
        free(h);
    }
    if (uh) { /* only the chained plugin wants it: a handle that carries its handle */
        struct icx_nph *h = malloc(sizeof(*h));
        if (h) {
            *h = (struct icx_nph){H_PASS, c, uh};
            *handle = h;
        }
    }
    return ncclSuccess;
}

static void icx_user_stop(const struct icx_nph *h)
{
    if (!h->user)
        return;
    if (h->ctx->version >= 5)
        atomic_load(&icx_user5)->stopEvent(h->user);
    else
        atomic_load(&icx_user4)->stopEvent(h->user);
}

static void icx_put_rec(const void *rec, size_t size)
{
    struct icx_slot slot;
    void *r = icx_reserve(size, &slot);
    if (r) {
        memcpy(r, rec, size);
        icx_commit(&slot);
    }
}

static ncclResult_t icx_nprof_stop(void *handle)
{
    struct icx_nph *h = handle;
    if (!h)
        return ncclSuccess;
    icx_user_stop(h);
    if (h->kind == H_COLL) {
        struct icx_nph_coll *k = handle;
        k->rec.e.dur = icx_ticks() - (uint64_t)k->rec.e.ts;
        icx_put_rec(&k->rec, sizeof(k->rec)); /* the slot stays: its channels come later */
    } else if (h->kind == H_KCH) {
        struct icx_nph_kch *k = handle;
        k->rec.e.ts = (int64_t)icx_ticks();
        icx_put_rec(&k->rec, sizeof(k->rec));
        free(k);
    } else if (h->kind == H_OP) {
        struct icx_nph_op *k = handle;
        icx_nproxy_add(h->ctx->id, k->channel, k->peer, k->is_send, 1, NULL);
        free(k);
    } else if (h->kind == H_STEP) {
        struct icx_nph_step *k = handle;
        if (k->in != W_NONE)
            k->wait[k->in] += icx_mono_ns() - k->since;
        icx_nproxy_add(h->ctx->id, k->channel, k->peer, k->is_send, 0, k);
        free(k);
    } else {
        free(h);
    }
    return ncclSuccess;
}

static ncclResult_t icx_nprof_state(void *handle, int state, icx_nprof_state_args_t *args)
{
    struct icx_nph *h = handle;
    if (!h)
        return ncclSuccess;
    if (h->user) {
        if (h->ctx->version >= 5)
            atomic_load(&icx_user5)->recordEventState(h->user, state, args);
        else
            atomic_load(&icx_user4)->recordEventState(h->user, state, args);
    }
    if (h->kind == H_KCH && state == ICX_NPROF_KERNEL_CH_STOP && args)
        ((struct icx_nph_kch *)h)->rec.gpu_stop = args->kernelCh.pTimer;
    if (h->kind == H_STEP) {
        struct icx_nph_step *k = (struct icx_nph_step *)h;
        int to = state == ICX_NPROF_SEND_GPU_WAIT || state == ICX_NPROF_RECV_GPU_WAIT ||
                         state == ICX_NPROF_RECV_FLUSH_WAIT
                     ? W_GPU
                 : state == ICX_NPROF_SEND_PEER_WAIT || state == ICX_NPROF_RECV_WAIT ? W_PEER
                 : state == ICX_NPROF_SEND_WAIT                                      ? W_NET
                                                                                     : -1;
        if ((state == ICX_NPROF_SEND_WAIT || state == ICX_NPROF_RECV_FLUSH_WAIT) && args &&
            args->proxyStep.transSize > k->bytes)
            k->bytes = args->proxyStep.transSize; /* where NCCL's proxy says how much moved */
        if (to >= 0) {
            uint64_t now = icx_mono_ns();
            if (k->in != W_NONE)
                k->wait[k->in] += now - k->since;
            k->in = to;
            k->since = now;
        }
    }
    return ncclSuccess;
}

static ncclResult_t icx_nprof_finalize(void *context)
{
    struct icx_nprof_ctx *c = context;
    if (!c)
        return ncclSuccess;
    if (c->chained) {
        if (c->version >= 5 && atomic_load(&icx_user5))
            atomic_load(&icx_user5)->finalize(c->user_ctx);
        else if (c->version == 4 && atomic_load(&icx_user4))
            atomic_load(&icx_user4)->finalize(c->user_ctx);
    }
    free(c); /* NCCL makes no call with the context after this; handles do not point at it
              * once their events stopped (the collective slots keep a stale pointer, unused) */
    return ncclSuccess;
}

/* ---- the tables, per version ---- */

static ncclResult_t icx_init_v5(void **context, uint64_t comm_id, int *mask, const char *name,
                                int nnodes, int nranks, int rank, icx_nccl_logger_t logfn)
{
    return icx_nprof_init(5, context, comm_id, mask, name, nnodes, nranks, rank, logfn);
}
static ncclResult_t icx_init_v6(void **context, uint64_t comm_id, int *mask, const char *name,
                                int nnodes, int nranks, int rank, icx_nccl_logger_t logfn)
{
    return icx_nprof_init(6, context, comm_id, mask, name, nnodes, nranks, rank, logfn);
}
static ncclResult_t icx_init_v4(void **context, int *mask, const char *name, uint64_t comm_hash,
                                int nnodes, int nranks, int rank, icx_nccl_logger_t logfn)
{
    return icx_nprof_init(4, context, comm_hash, mask, name, nnodes, nranks, rank, logfn);
}
static ncclResult_t icx_start_v5(void *context, void **handle, icx_nprof_descr_v5_t *d)
{
    return icx_nprof_start(context, handle, d, d->type, d->parentObj, &d->coll, &d->kernelCh);
}
static ncclResult_t icx_start_v4(void *context, void **handle, icx_nprof_descr_v4_t *d)
{
    struct icx_nprof_coll coll;
    memcpy(&coll, &d->coll, offsetof(struct icx_nprof_coll, parentGroup)); /* v4 ends there */
    coll.parentGroup = NULL;
    return icx_nprof_start(context, handle, d, d->type, d->parentObj, &coll, &d->kernelCh);
}

ICX_EXPORT const icx_nprof_v5_t ncclProfiler_v6 = {
    "icxtrace", icx_init_v6, icx_start_v5, icx_nprof_stop, icx_nprof_state, icx_nprof_finalize};
ICX_EXPORT const icx_nprof_v5_t ncclProfiler_v5 = {
    "icxtrace", icx_init_v5, icx_start_v5, icx_nprof_stop, icx_nprof_state, icx_nprof_finalize};
ICX_EXPORT const icx_nprof_v4_t ncclProfiler_v4 = {
    "icxtrace", icx_init_v4, icx_start_v4, icx_nprof_stop, icx_nprof_state, icx_nprof_finalize};

/* ---- the writer: the proxy aggregates that moved ---- */

void icx_nprof_tick(struct icx_frame *f)
{
    pthread_mutex_lock(&icx_nproxy_lock);
    for (unsigned i = 0; i < ICX_NPROXY_SLOTS; i++) {
        struct icx_nproxy *e = &icx_nproxy[i];
        if (!e->ctx || !e->dirty)
            continue;
        struct icx_rec_nccl_pproxy *r = icx_frame_put(f, ICX_REC_NCCL_PPROXY, e->ctx, sizeof(*r));
        if (!r)
            break; /* the frame is full: the rest next flush, still dirty */
        e->dirty = 0;
        r->peer = e->peer;
        r->channel = e->channel;
        r->is_send = e->is_send;
        r->ops = e->ops;
        r->steps = e->steps;
        r->bytes = e->bytes;
        r->gpu_wait_ns = e->wait[W_GPU];
        r->peer_wait_ns = e->wait[W_PEER];
        r->net_ns = e->wait[W_NET];
    }
    pthread_mutex_unlock(&icx_nproxy_lock);
}

/* fork(): the table's lock; the child's stream starts without the parent's aggregates. */
void icx_nprof_fork_prepare(void)
{
    pthread_mutex_lock(&icx_nproxy_lock);
}

void icx_nprof_fork_parent(void)
{
    pthread_mutex_unlock(&icx_nproxy_lock);
}

void icx_nprof_fork_child(void)
{
    pthread_mutex_init(&icx_nproxy_lock, NULL);
    memset(icx_nproxy, 0, sizeof(icx_nproxy));
}

/* ---- how NCCL finds it ---- */

void icx_nprof_setup(void)
{
    if (icx_cfg.nccl_profiler && !getenv("NCCL_PROFILER_PLUGIN"))
        setenv("NCCL_PROFILER_PLUGIN", "STATIC_PLUGIN", 0);
}

void *icx_nprof_dl_wrap(const char *name, void *handle)
{
    if (!icx_cfg.nccl_profiler)
        return NULL;
    static const struct {
        const char *name;
        const void *ours;
        int version; /* the digit after "_v" */
    } t[] = {
#define ICX_WRAP(n) {#n, &n, #n[sizeof(#n) - 2] - '0'},
#define ICX_OPS(n)
#include "wraps_nprof.def"
#undef ICX_OPS
#undef ICX_WRAP
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        if (strcmp(name, t[i].name) != 0)
            continue;
        void *theirs = icx_dlsym_real(handle, name);
        if (!theirs || theirs == t[i].ours)
            return NULL; /* none there, or ours already (STATIC_PLUGIN) */
        if (t[i].version >= 5) {
            const icx_nprof_v5_t *none = NULL;
            atomic_compare_exchange_strong(&icx_user5, &none, theirs);
        } else {
            const icx_nprof_v4_t *none = NULL;
            atomic_compare_exchange_strong(&icx_user4, &none, theirs);
        }
        char note[160];
        snprintf(note, sizeof(note),
                 "the NCCL profiler plugin's %s of the user's (NCCL_PROFILER_PLUGIN) is chained "
                 "behind icxtrace's: both see NCCL's events",
                 name);
        icx_note(0, note);
        return (void *)t[i].ours;
    }
    return NULL;
}
