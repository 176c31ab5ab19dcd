/* NCCL: communicators, collectives, point-to-point and groups.
 *
 * The real function is the library's pnccl* alias when it has one (NCCL exports them PMPI style),
 * else the next ncclX.  NCCL calls some of its own public entry points (ncclBcast ->
 * ncclBroadcast), and those calls land here again: the per-thread guard makes the inner one go
 * straight through, so each user call is recorded once.
 *
 * Every rank must see the same communicator id and sequence numbers for the same operation: the
 * id is a hash of the unique id (split: of the parent's id, the color and how many splits the
 * parent has had); collectives are numbered per communicator, send and recv per (communicator,
 * peer, direction).  Each call is recorded on entry and on return (host times, result); the bytes
 * are this rank's buffer as nccl-tests counts them.  The GPU side: pooled events recorded on the
 * call's stream before and after it (gpu.c: never in a capturing stream, polled by the writer),
 * so the span covers NCCL's kernel from the moment the stream reached it; calls in a group are
 * timed together around the outermost ncclGroupEnd, on every stream the group used. */
#include <errno.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_int.h"
#include "icx.h"

#define ICX_EXPORT __attribute__((visibility("default")))
#define NCCL_LIB "libnccl.so"

/* ---- communicators ---- */

struct icx_ncomm {
    ncclComm_t h;
    uint64_t id;
    int rank, nranks;
    int initializing; /* created non-blocking (ncclInProgress), not yet seen ready */
    uint64_t coll_seq, splits;
    uint64_t *p2p_seq; /* [peer * 2 + (0 send, 1 recv)] */
};

#define ICX_NCOMM_MAX 4096
static struct icx_ncomm icx_ncomms[ICX_NCOMM_MAX];
static unsigned icx_nncomms;
static pthread_mutex_t icx_ncomm_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint32_t icx_group_ids;
/* NCCL's own guard: an NCCL call made inside another (ncclBcast -> ncclBroadcast) goes straight
 * through, but the process-wide guard stays off while NCCL runs, so what NCCL itself does through
 * hooked libraries on this thread -- libibverbs found with dlvsym, above all -- is traced. */
static ICX_TLS int icx_nccl_guard;
static inline int icx_nccl_on(void)
{
    return icx_hooks_on() && !icx_nccl_guard;
}
static inline void icx_ncall_enter(struct icx_call *c)
{
    icx_nccl_guard = 1;
    c->t0 = icx_ticks();
}
static inline void icx_ncall_exit(const struct icx_call *c)
{
    icx_nccl_guard = 0;
    errno = c->saved_errno;
}

static ICX_TLS int icx_group_depth;
static ICX_TLS uint32_t icx_group_id;
#define ICX_GROUP_STREAMS 8 /* streams timed per group; more are counted as lost timing */
static ICX_TLS cudaStream_t icx_group_streams[ICX_GROUP_STREAMS];
static ICX_TLS int icx_group_nstreams;

static int icx_nccl_gpu_on(void)
{
    return icx_cfg.gpu_timing != ICX_GPUT_OFF;
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

static uint64_t icx_fnv(const void *p, size_t n, uint64_t h)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Under the lock. */
static struct icx_ncomm *icx_ncomm_find(ncclComm_t h)
{
    for (unsigned i = 0; i < icx_nncomms; i++)
        if (icx_ncomms[i].h == h)
            return &icx_ncomms[i];
    return NULL;
}

static void icx_ncomm_add(ncclComm_t h, uint64_t id, int rank, int nranks)
{
    pthread_mutex_lock(&icx_ncomm_lock);
    struct icx_ncomm *c = icx_ncomm_find(h);
    if (!c && icx_nncomms < ICX_NCOMM_MAX)
        c = &icx_ncomms[icx_nncomms++];
    if (c) {
        free(c->p2p_seq);
        *c = (struct icx_ncomm){h, id, rank, nranks, 0, 0, 0, NULL};
        if (nranks > 0)
            c->p2p_seq = calloc((size_t)nranks * 2, sizeof(uint64_t));
    }
    pthread_mutex_unlock(&icx_ncomm_lock);
}

static void icx_ncomm_forget(ncclComm_t h)
{
    pthread_mutex_lock(&icx_ncomm_lock);
    struct icx_ncomm *c = icx_ncomm_find(h);
    if (c) {
        free(c->p2p_seq);
        *c = icx_ncomms[--icx_nncomms];
        memset(&icx_ncomms[icx_nncomms], 0, sizeof(icx_ncomms[0]));
    }
    pthread_mutex_unlock(&icx_ncomm_lock);
}

static void icx_rec_comm(enum icx_api api, uint64_t t0, ncclComm_t h, uint64_t id, uint64_t parent,
                         int rank, int nranks, int device, int color, int key, ncclResult_t rc)
{
    struct icx_slot slot;
    struct icx_rec_nccl_comm *r = icx_reserve(sizeof(*r), &slot);
    if (!r)
        return;
    memset(r, 0, sizeof(*r));
    r->e.h.type = ICX_REC_NCCL_COMM;
    r->e.h.size = sizeof(*r);
    r->e.h.aux = api;
    r->e.ts = (int64_t)t0;
    r->e.dur = icx_ticks() - t0;
    r->comm = (uintptr_t)h;
    r->comm_id = id;
    r->parent_id = parent;
    r->rank = rank;
    r->nranks = nranks;
    r->device = device;
    r->result = rc;
    r->color = color;
    r->key = key;
    icx_commit(&slot);
}

/* ---- the real functions: pnccl* first ---- */

struct icx_nsym {
    struct icx_sym p, plain;
    _Atomic(void *) fn;
};
#define ICX_NCCL_DECL(name, params)                                                                \
    typedef ncclResult_t(*icx_real_##name##_t) params;                                             \
    static struct icx_nsym icx_nsym_##name = {                                                     \
        {"p" #name, NCCL_LIB, NULL, NULL, 0}, {#name, NCCL_LIB, NULL, NULL, 0}, NULL}
#define ICX_NCCL_REAL(name) ((icx_real_##name##_t)icx_nccl_real(&icx_nsym_##name))
/* Every wrapper's opening: the real function (or fail), straight through when not tracing or
 * re-entered, else the bracket `c` begins. */
#define ICX_NCCL_BEGIN(name, args)                                                                 \
    icx_real_##name##_t real = ICX_NCCL_REAL(name);                                                \
    if (!real)                                                                                     \
        return ncclSystemError;                                                                    \
    if (!icx_nccl_on())                                                                           \
        return real args;                                                                          \
    struct icx_call c;                                                                             \
    icx_ncall_enter(&c)

static void *icx_nccl_real(struct icx_nsym *s)
{
    void *f = atomic_load_explicit(&s->fn, memory_order_acquire);
    if (ICX_LIKELY(f != NULL))
        return f;
    f = icx_resolve(&s->p);
    if (!f)
        f = icx_resolve(&s->plain);
    if (f)
        atomic_store_explicit(&s->fn, f, memory_order_release);
    return f;
}

ICX_NCCL_DECL(ncclCommCuDevice, (const ncclComm_t, int *));
ICX_NCCL_DECL(ncclCommCount, (const ncclComm_t, int *));
ICX_NCCL_DECL(ncclCommUserRank, (const ncclComm_t, int *));

static int icx_comm_device(ncclComm_t h)
{
    icx_real_ncclCommCuDevice_t f = ICX_NCCL_REAL(ncclCommCuDevice);
    int d = -1;
    if (!f || !h || f(h, &d) != ncclSuccess)
        return -1;
    return d;
}

/* ---- calls ---- */

static size_t icx_nccl_dtsize(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 1; /* fp8 formats */
    }
}

/* The sequence number of a call about to be issued on communicator h. */
static uint64_t icx_next_seq(ncclComm_t h, int peer, int p2p_dir)
{
    uint64_t seq = 0;
    pthread_mutex_lock(&icx_ncomm_lock);
    struct icx_ncomm *c = icx_ncomm_find(h);
    if (c) {
        if (p2p_dir < 0)
            seq = ++c->coll_seq;
        else if (c->p2p_seq && peer >= 0 && peer < c->nranks)
            seq = ++c->p2p_seq[peer * 2 + p2p_dir];
    }
    pthread_mutex_unlock(&icx_ncomm_lock);
    return seq;
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

/* NCCL's result as the CUDA result gpu.c wants: did the call enqueue its work? */
static cudaError_t icx_nccl_enqueued(ncclResult_t rc)
{
    return rc == ncclSuccess || rc == ncclInProgress ? cudaSuccess : cudaErrorUnknown;
}

/* A wrapper around one collective / p2p call. */
#define ICX_NCCL_CALL(name, params, args, comm, count, dt, redop, peer, dir, stream)                \
    ICX_NCCL_DECL(name, params);                                                                   \
    ICX_EXPORT ncclResult_t name params                                                            \
    {                                                                                              \
        ICX_NCCL_BEGIN(name, args);                                                                \
        uint64_t seq = icx_next_seq(comm, peer, dir);                                              \
        icx_rec_call(ICX_API_##name, c.t0, 1, comm, count, (int)(dt), (int)(redop), peer, seq,     \
                     stream, ncclSuccess, 0);                                                      \
        struct icx_gpu_req g;                                                                      \
        int timed = 0;                                                                             \
        if (icx_group_depth)                                                                       \
            icx_group_note_stream(stream);                                                         \
        else if (icx_nccl_gpu_on())                                                                \
            timed = icx_gpu_begin(&g, stream);                                                     \
        ncclResult_t rc = real args;                                                               \
        icx_call_returned(&c);                                                                     \
        uint32_t gid = timed ? icx_gpu_end_as(&g, stream, icx_nccl_enqueued(rc), 0) : 0;           \
        icx_rec_call(ICX_API_##name, c.t0, 0, comm, count, (int)(dt), (int)(redop), peer, seq,     \
                     stream, rc, gid);                                                             \
        icx_ncall_exit(&c);                                                                         \
        return rc;                                                                                 \
    }

ICX_NCCL_CALL(ncclAllReduce, (const void *sb, void *rb, size_t n, ncclDataType_t t, ncclRedOp_t op,
                              ncclComm_t cm, cudaStream_t s),
              (sb, rb, n, t, op, cm, s), cm, n, t, op, -1, -1, s)
ICX_NCCL_CALL(ncclBroadcast, (const void *sb, void *rb, size_t n, ncclDataType_t t, int root,
                              ncclComm_t cm, cudaStream_t s),
              (sb, rb, n, t, root, cm, s), cm, n, t, -1, root, -1, s)
ICX_NCCL_CALL(ncclBcast, (void *b, size_t n, ncclDataType_t t, int root, ncclComm_t cm,
                          cudaStream_t s),
              (b, n, t, root, cm, s), cm, n, t, -1, root, -1, s)
ICX_NCCL_CALL(ncclReduce, (const void *sb, void *rb, size_t n, ncclDataType_t t, ncclRedOp_t op,
                           int root, ncclComm_t cm, cudaStream_t s),
              (sb, rb, n, t, op, root, cm, s), cm, n, t, op, root, -1, s)
ICX_NCCL_CALL(ncclAllGather, (const void *sb, void *rb, size_t n, ncclDataType_t t, ncclComm_t cm,
                              cudaStream_t s),
              (sb, rb, n, t, cm, s), cm, n, t, -1, -1, -1, s)
ICX_NCCL_CALL(ncclReduceScatter, (const void *sb, void *rb, size_t n, ncclDataType_t t,
                                  ncclRedOp_t op, ncclComm_t cm, cudaStream_t s),
              (sb, rb, n, t, op, cm, s), cm, n, t, op, -1, -1, s)
ICX_NCCL_CALL(ncclAlltoAll, (const void *sb, void *rb, size_t n, ncclDataType_t t, ncclComm_t cm,
                             cudaStream_t s),
              (sb, rb, n, t, cm, s), cm, n, t, -1, -1, -1, s)
ICX_NCCL_CALL(ncclGather, (const void *sb, void *rb, size_t n, ncclDataType_t t, int root,
                           ncclComm_t cm, cudaStream_t s),
              (sb, rb, n, t, root, cm, s), cm, n, t, -1, root, -1, s)
ICX_NCCL_CALL(ncclScatter, (const void *sb, void *rb, size_t n, ncclDataType_t t, int root,
                            ncclComm_t cm, cudaStream_t s),
              (sb, rb, n, t, root, cm, s), cm, n, t, -1, root, -1, s)
ICX_NCCL_CALL(ncclSend, (const void *sb, size_t n, ncclDataType_t t, int peer, ncclComm_t cm,
                         cudaStream_t s),
              (sb, n, t, peer, cm, s), cm, n, t, -1, peer, 0, s)
ICX_NCCL_CALL(ncclRecv, (void *rb, size_t n, ncclDataType_t t, int peer, ncclComm_t cm,
                         cudaStream_t s),
              (rb, n, t, peer, cm, s), cm, n, t, -1, peer, 1, s)

/* ---- groups ---- */

ICX_NCCL_DECL(ncclGroupStart, (void));
ICX_NCCL_DECL(ncclGroupEnd, (void));
ncclResult_t ncclGroupStart(void); /* nccl.h declares them without a prototype */
ncclResult_t ncclGroupEnd(void);

ICX_EXPORT ncclResult_t ncclGroupStart(void)
{
    icx_real_ncclGroupStart_t real = ICX_NCCL_REAL(ncclGroupStart);
    if (!real)
        return ncclSystemError;
    ncclResult_t rc = real();
    if (rc == ncclSuccess && !icx_nccl_guard && icx_group_depth++ == 0) {
        icx_group_id = atomic_fetch_add_explicit(&icx_group_ids, 1, memory_order_relaxed) + 1;
        icx_group_nstreams = 0;
    }
    return rc;
}

ICX_EXPORT ncclResult_t ncclGroupEnd(void)
{
    icx_real_ncclGroupEnd_t real = ICX_NCCL_REAL(ncclGroupEnd);
    if (!real)
        return ncclSystemError;
    if (!icx_nccl_on() || icx_group_depth == 0)
        return real();
    struct icx_call c;
    icx_ncall_enter(&c);
    int outer = icx_group_depth == 1; /* the outermost end launches the group */
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
                uint32_t got = icx_gpu_end_as(&g[i], icx_group_streams[i], icx_nccl_enqueued(rc), gid);
                gid = gid ? gid : got;
            }
        icx_rec_call(ICX_API_ncclGroupEnd, c.t0, 0, NULL, 0, -1, -1, -1, 0,
                     ns ? icx_group_streams[0] : NULL, rc, gid);
        icx_group_nstreams = 0;
    }
    icx_group_depth--;
    icx_ncall_exit(&c);
    return rc;
}

/* ---- communicator lifecycle ---- */

ICX_NCCL_DECL(ncclCommInitRank, (ncclComm_t *, int, ncclUniqueId, int));
ICX_NCCL_DECL(ncclCommInitRankConfig, (ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *));
ICX_NCCL_DECL(ncclCommSplit, (ncclComm_t, int, int, ncclComm_t *, ncclConfig_t *));
ICX_NCCL_DECL(ncclCommDestroy, (ncclComm_t));
ICX_NCCL_DECL(ncclCommAbort, (ncclComm_t));
ICX_NCCL_DECL(ncclCommFinalize, (ncclComm_t));

/* Rank and size of a communicator NCCL made for us (split, shrink), asked of NCCL itself. */
static void icx_comm_shape(ncclComm_t h, int *rank, int *nranks)
{
    icx_real_ncclCommCount_t fc = ICX_NCCL_REAL(ncclCommCount);
    icx_real_ncclCommUserRank_t fu = ICX_NCCL_REAL(ncclCommUserRank);
    if (h && fc)
        fc(h, nranks);
    if (h && fu)
        fu(h, rank);
}

static void icx_debug_collect(void);
static void icx_dumps_collect(uint64_t comm_id);
static void icx_dumps_prepare(void);
static pthread_once_t icx_dump_once;

static void icx_comm_created(enum icx_api api, uint64_t t0, ncclComm_t *out, uint64_t id,
                             uint64_t parent, int rank, int nranks, int color, int key,
                             ncclResult_t rc)
{
    /* ncclInProgress: a non-blocking communicator, usable once ncclCommGetAsyncError says so;
     * its handle is valid already. */
    ncclComm_t h = (rc == ncclSuccess || rc == ncclInProgress) && out ? *out : NULL;
    if (h)
        icx_ncomm_add(h, id, rank, nranks);
    if (h && rc == ncclInProgress) {
        pthread_mutex_lock(&icx_ncomm_lock);
        struct icx_ncomm *c = icx_ncomm_find(h);
        if (c)
            c->initializing = 1;
        pthread_mutex_unlock(&icx_ncomm_lock);
    }
    /* A non-blocking one cannot be asked yet: NCCL takes the caller's current device. */
    int dev = rc == ncclSuccess ? icx_comm_device(h) : rc == ncclInProgress ? icx_current_device() : -1;
    icx_rec_comm(api, t0, h, id, parent, rank, nranks, dev, color, key, rc);
    if (rc == ncclSuccess) { /* (non-blocking: when ncclCommGetAsyncError first says ready) */
        pthread_once(&icx_dump_once, icx_dumps_prepare);
        icx_dumps_collect(id);
        icx_debug_collect();
    }
}

/* ---- NCCL's own view of the machine: its topology and graph dumps ----
 * Unless the user set them, NCCL_TOPO_DUMP_FILE and NCCL_GRAPH_DUMP_FILE point at private files
 * before the first communicator is created (setenv, once, before NCCL reads its environment).
 * NCCL writes them during a communicator's creation, on that communicator's rank
 * NCCL_{TOPO,GRAPH}_DUMP_FILE_RANK (0 by default) only; after every creation whatever was written
 * is queued for the trace, tagged with the communicator's id (private files are then removed; a
 * file of the user's is kept, and a text equal to the last one read from it not queued again). */
static const char *const icx_dump_env[2] = {"NCCL_TOPO_DUMP_FILE", "NCCL_GRAPH_DUMP_FILE"};
static char icx_dump_path[2][256];
static int icx_dump_ours[2];
static uint64_t icx_dump_last[2]; /* hash of the last text read from a file of the user's */
static pthread_once_t icx_dump_once = PTHREAD_ONCE_INIT; /* (declared above) */
static pthread_mutex_t icx_dump_lock = PTHREAD_MUTEX_INITIALIZER;
struct icx_dump_item { /* read, for the writer */
    int kind;          /* NCCL_DUMP aux: 1 topology, 2 graph, 3 debug lines */
    uint64_t comm_id;  /* the communicator whose creation wrote it (0: none) */
    char *text;
    struct icx_dump_item *next;
};
static struct icx_dump_item *icx_dump_head, **icx_dump_tail = &icx_dump_head;
static long icx_debug_off; /* how far NCCL_DEBUG_FILE has been read */

static void icx_dump_queue(int kind, uint64_t comm_id, char *text)
{
    struct icx_dump_item *it = malloc(sizeof(*it));
    if (!it) {
        free(text);
        return;
    }
    *it = (struct icx_dump_item){kind, comm_id, text, NULL};
    pthread_mutex_lock(&icx_dump_lock);
    *icx_dump_tail = it;
    icx_dump_tail = &it->next;
    pthread_mutex_unlock(&icx_dump_lock);
}

static void icx_dumps_prepare(void)
{
    for (int k = 0; k < 2; k++) {
        const char *v = getenv(icx_dump_env[k]);
        int pid = 0;
        /* a private file of a traced parent's (the variable was inherited): not the user's */
        int inherited = v && sscanf(v, "/tmp/icxtrace-%d-nccl-", &pid) == 1 && pid != (int)getpid();
        if (v && *v && !inherited) {
            snprintf(icx_dump_path[k], sizeof(icx_dump_path[k]), "%s", v);
            continue;
        }
        snprintf(icx_dump_path[k], sizeof(icx_dump_path[k]), "/tmp/icxtrace-%d-nccl-%s.xml",
                 (int)getpid(), k ? "graph" : "topo");
        icx_dump_ours[k] = setenv(icx_dump_env[k], icx_dump_path[k], 1) == 0;
    }
}

static void icx_dumps_collect(uint64_t comm_id)
{
    for (int k = 0; k < 2; k++) {
        FILE *f = icx_dump_path[k][0] ? fopen(icx_dump_path[k], "re") : NULL;
        if (!f)
            continue;
        char *buf = malloc(4u << 20);
        size_t n = buf ? fread(buf, 1, (4u << 20) - 1, f) : 0;
        fclose(f);
        if (icx_dump_ours[k])
            unlink(icx_dump_path[k]);
        if (!buf || !n) {
            free(buf);
            continue;
        }
        buf[n] = 0;
        uint64_t h = icx_fnv(buf, n, 0xcbf29ce484222325ull);
        if (!icx_dump_ours[k] && h == icx_dump_last[k]) {
            free(buf); /* not rewritten by this creation */
            continue;
        }
        icx_dump_last[k] = h;
        icx_dump_queue(k + 1, comm_id, buf);
    }
}

/* NCCL_DEBUG output, where the user sent it to a file (NCCL_DEBUG_FILE; %h and %p expanded as
 * NCCL does): after each communicator is made, the lines added since the last look that name a
 * channel's transport ("via P2P/...", "via NET/IB/...") or the rings' summary are kept for the
 * trace.  Output to stdout is not touched. */
static void icx_debug_collect(void)
{
    const char *f = getenv("NCCL_DEBUG_FILE");
    if (!f || !*f)
        return;
    char host[256] = "", path[512];
    gethostname(host, sizeof(host) - 1);
    host[strcspn(host, ".")] = 0;
    size_t o = 0;
    for (size_t i = 0; f[i] && o + 1 < sizeof(path); i++) {
        if (f[i] == '%' && (f[i + 1] == 'h' || f[i + 1] == 'p')) {
            int n = f[i + 1] == 'h' ? snprintf(path + o, sizeof(path) - o, "%s", host)
                                    : snprintf(path + o, sizeof(path) - o, "%d", (int)getpid());
            o = n > 0 && o + (size_t)n < sizeof(path) ? o + (size_t)n : sizeof(path) - 1;
            i++;
        } else {
            path[o++] = f[i];
        }
    }
    path[o] = 0;
    FILE *in = fopen(path, "re");
    if (!in)
        return;
    char line[1024];
    size_t cap = 0, len = 0;
    char *keep = NULL;
    pthread_mutex_lock(&icx_dump_lock);
    if (fseek(in, icx_debug_off, SEEK_SET) == 0)
        while (fgets(line, sizeof(line), in)) {
            if (!strstr(line, " via ") && !strstr(line, "Connected all"))
                continue;
            size_t n = strlen(line);
            if (len + n + 1 > cap) {
                size_t ncap = (cap ? 2 * cap : 4096) + n;
                char *nk = realloc(keep, ncap);
                if (!nk)
                    break;
                keep = nk;
                cap = ncap;
            }
            memcpy(keep + len, line, n + 1);
            len += n;
        }
    long at = ftell(in);
    fclose(in);
    if (at > icx_debug_off)
        icx_debug_off = at;
    pthread_mutex_unlock(&icx_dump_lock);
    if (keep)
        icx_dump_queue(3, 0, keep);
}

void icx_nccl_writer_tick(struct icx_frame *f)
{
    pthread_mutex_lock(&icx_dump_lock);
    struct icx_dump_item *it = icx_dump_head;
    icx_dump_head = NULL;
    icx_dump_tail = &icx_dump_head;
    pthread_mutex_unlock(&icx_dump_lock);
    while (it) {
        char *text = it->text;
        size_t len = strlen(text), part = 60000, nparts = (len + part - 1) / part;
        for (size_t i = 0; i < nparts; i++) {
            size_t cut = (i + 1) * part < len ? (i + 1) * part : len;
            char save = text[cut];
            text[cut] = 0;
            uint32_t id = icx_intern(text + i * part);
            text[cut] = save;
            struct icx_rec_nccl_dump *r =
                icx_frame_put(f, ICX_REC_NCCL_DUMP, (uint32_t)it->kind, sizeof(*r));
            if (r) {
                r->text = id;
                r->part = (uint32_t)i;
                r->nparts = (uint32_t)nparts;
                r->total_bytes = (uint32_t)len;
                r->comm_id = it->comm_id;
            }
        }
        struct icx_dump_item *next = it->next;
        free(text);
        free(it);
        it = next;
    }
}

static ncclResult_t icx_init_rank(enum icx_api api, ncclComm_t *comm, int nranks,
                                  ncclUniqueId uid, int rank, ncclConfig_t *config, int with_config)
{
    icx_real_ncclCommInitRank_t plain = ICX_NCCL_REAL(ncclCommInitRank);
    icx_real_ncclCommInitRankConfig_t cfg = ICX_NCCL_REAL(ncclCommInitRankConfig);
    if (with_config ? !cfg : !plain)
        return ncclSystemError;
#define ICX_INIT() (with_config ? cfg(comm, nranks, uid, rank, config) : plain(comm, nranks, uid, rank))
    if (!icx_nccl_on())
        return ICX_INIT();
    pthread_once(&icx_dump_once, icx_dumps_prepare);
    struct icx_call c;
    icx_ncall_enter(&c);
    ncclResult_t rc = ICX_INIT();
#undef ICX_INIT
    icx_call_returned(&c);
    icx_comm_created(api, c.t0, comm, icx_fnv(&uid, sizeof(uid), 0xcbf29ce484222325ull), 0, rank,
                     nranks, 0, 0, rc);
    icx_ncall_exit(&c);
    return rc;
}

ICX_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId uid, int rank)
{
    return icx_init_rank(ICX_API_ncclCommInitRank, comm, nranks, uid, rank, NULL, 0);
}

ICX_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId uid,
                                               int rank, ncclConfig_t *config)
{
    return icx_init_rank(ICX_API_ncclCommInitRankConfig, comm, nranks, uid, rank, config, 1);
}

ICX_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                      ncclConfig_t *config)
{
    ICX_NCCL_BEGIN(ncclCommSplit, (comm, color, key, newcomm, config));
    ncclResult_t rc = real(comm, color, key, newcomm, config);
    icx_call_returned(&c);
    /* Every rank of the parent splits in the same order: (parent id, split count, color) names
     * the child on all of them. */
    uint64_t parent = 0, n = 0;
    pthread_mutex_lock(&icx_ncomm_lock);
    struct icx_ncomm *p = icx_ncomm_find(comm);
    if (p) {
        parent = p->id;
        n = ++p->splits;
    }
    pthread_mutex_unlock(&icx_ncomm_lock);
    uint64_t id = icx_fnv(&n, sizeof(n), icx_fnv(&color, sizeof(color), parent ^ 0x5157));
    int rank = -1, nranks = -1;
    if (rc == ncclSuccess && newcomm)
        icx_comm_shape(*newcomm, &rank, &nranks);
    icx_comm_created(ICX_API_ncclCommSplit, c.t0, newcomm, id, parent, rank, nranks, color, key, rc);
    icx_ncall_exit(&c);
    return rc;
}

static ncclResult_t icx_comm_end(enum icx_api api, ncclResult_t (*real)(ncclComm_t), ncclComm_t h)
{
    if (!real)
        return ncclSystemError;
    if (!icx_nccl_on())
        return real(h);
    struct icx_call c;
    icx_ncall_enter(&c);
    uint64_t id = 0;
    int rank = -1, nranks = -1;
    pthread_mutex_lock(&icx_ncomm_lock);
    struct icx_ncomm *p = icx_ncomm_find(h);
    if (p) {
        id = p->id;
        rank = p->rank;
        nranks = p->nranks;
    }
    pthread_mutex_unlock(&icx_ncomm_lock);
    ncclResult_t rc = real(h);
    icx_call_returned(&c);
    if (api != ICX_API_ncclCommFinalize)
        icx_ncomm_forget(h);
    icx_rec_comm(api, c.t0, h, id, 0, rank, nranks, -1, 0, 0, rc);
    icx_ncall_exit(&c);
    return rc;
}

ICX_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t h)
{
    return icx_comm_end(ICX_API_ncclCommDestroy, ICX_NCCL_REAL(ncclCommDestroy), h);
}
ICX_EXPORT ncclResult_t ncclCommAbort(ncclComm_t h)
{
    return icx_comm_end(ICX_API_ncclCommAbort, ICX_NCCL_REAL(ncclCommAbort), h);
}
ICX_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t h)
{
    return icx_comm_end(ICX_API_ncclCommFinalize, ICX_NCCL_REAL(ncclCommFinalize), h);
}

/* ---- the rest of the communicator API ---- */

ICX_NCCL_DECL(ncclGetUniqueId, (ncclUniqueId *));
ICX_NCCL_DECL(ncclCommInitAll, (ncclComm_t *, int, const int *));
ICX_NCCL_DECL(ncclCommInitRankScalable, (ncclComm_t *, int, int, int, ncclUniqueId *,
                                         ncclConfig_t *));
ICX_NCCL_DECL(ncclCommShrink, (ncclComm_t, int *, int, ncclComm_t *, ncclConfig_t *, int));
ICX_NCCL_DECL(ncclCommRevoke, (ncclComm_t, int));
ICX_NCCL_DECL(ncclCommGetAsyncError, (ncclComm_t, ncclResult_t *));
ICX_NCCL_DECL(ncclCommRegister, (const ncclComm_t, void *, size_t, void **));
ICX_NCCL_DECL(ncclCommDeregister, (const ncclComm_t, void *));
ICX_NCCL_DECL(ncclCommWindowRegister, (ncclComm_t, void *, size_t, ncclWindow_t *, int));
ICX_NCCL_DECL(ncclCommWindowDeregister, (ncclComm_t, ncclWindow_t));
ICX_NCCL_DECL(ncclGroupSimulateEnd, (ncclSimInfo_t *));

static uint64_t icx_comm_id_of(ncclComm_t h, int *rank, int *nranks)
{
    uint64_t id = 0;
    pthread_mutex_lock(&icx_ncomm_lock);
    struct icx_ncomm *p = icx_ncomm_find(h);
    if (p) {
        id = p->id;
        if (rank)
            *rank = p->rank;
        if (nranks)
            *nranks = p->nranks;
    }
    pthread_mutex_unlock(&icx_ncomm_lock);
    return id;
}

ICX_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *uid)
{
    ICX_NCCL_BEGIN(ncclGetUniqueId, (uid));
    ncclResult_t rc = real(uid);
    icx_call_returned(&c);
    /* the id its communicator will have on every rank: where the job's bootstrap began */
    icx_rec_comm(ICX_API_ncclGetUniqueId, c.t0, NULL,
                 rc == ncclSuccess ? icx_fnv(uid, sizeof(*uid), 0xcbf29ce484222325ull) : 0, 0, -1,
                 -1, -1, 0, 0, rc);
    icx_ncall_exit(&c);
    return rc;
}

ICX_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    ICX_NCCL_BEGIN(ncclCommInitAll, (comms, ndev, devlist));
    pthread_once(&icx_dump_once, icx_dumps_prepare);
    ncclResult_t rc = real(comms, ndev, devlist);
    icx_call_returned(&c);
    /* One process holds every rank: an id unique to this call is the same for all of them. */
    static _Atomic uint64_t calls;
    uint64_t n = atomic_fetch_add(&calls, 1) + 1, pid = (uint64_t)getpid();
    uint64_t id = icx_fnv(&n, sizeof(n), icx_fnv(&pid, sizeof(pid), 0xa11));
    for (int i = 0; i < ndev; i++)
        icx_comm_created(ICX_API_ncclCommInitAll, c.t0, &comms[i], id, 0, i, ndev, 0, 0, rc);
    icx_ncall_exit(&c);
    return rc;
}

ICX_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t *comm, int nranks, int rank, int nid,
                                                 ncclUniqueId *ids, ncclConfig_t *config)
{
    ICX_NCCL_BEGIN(ncclCommInitRankScalable, (comm, nranks, rank, nid, ids, config));
    pthread_once(&icx_dump_once, icx_dumps_prepare);
    ncclResult_t rc = real(comm, nranks, rank, nid, ids, config);
    icx_call_returned(&c);
    uint64_t id = nid > 0 && ids ? icx_fnv(ids, sizeof(*ids) * (size_t)nid, 0xcbf29ce484222325ull) : 0;
    icx_comm_created(ICX_API_ncclCommInitRankScalable, c.t0, comm, id, 0, rank, nranks, 0, 0, rc);
    icx_ncall_exit(&c);
    return rc;
}

ICX_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int *excl, int nexcl, ncclComm_t *newcomm,
                                       ncclConfig_t *config, int flags)
{
    ICX_NCCL_BEGIN(ncclCommShrink, (comm, excl, nexcl, newcomm, config, flags));
    ncclResult_t rc = real(comm, excl, nexcl, newcomm, config, flags);
    icx_call_returned(&c);
    /* Every remaining rank shrinks the same parent the same way: (parent, its split count, the
     * excluded ranks) names the child on all of them. */
    uint64_t n = 0, parent;
    pthread_mutex_lock(&icx_ncomm_lock);
    struct icx_ncomm *p = icx_ncomm_find(comm);
    parent = p ? p->id : 0;
    if (p)
        n = ++p->splits;
    pthread_mutex_unlock(&icx_ncomm_lock);
    uint64_t id = icx_fnv(&n, sizeof(n), parent ^ 0x5badull);
    if (excl && nexcl > 0)
        id = icx_fnv(excl, sizeof(int) * (size_t)nexcl, id);
    int rank = -1, nranks = -1;
    if (rc == ncclSuccess && newcomm)
        icx_comm_shape(*newcomm, &rank, &nranks);
    icx_comm_created(ICX_API_ncclCommShrink, c.t0, newcomm, id, parent, rank, nranks, nexcl, flags,
                     rc);
    icx_ncall_exit(&c);
    return rc;
}

ICX_EXPORT ncclResult_t ncclCommRevoke(ncclComm_t comm, int flags)
{
    ICX_NCCL_BEGIN(ncclCommRevoke, (comm, flags));
    ncclResult_t rc = real(comm, flags);
    icx_call_returned(&c);
    int rank = -1, nranks = -1;
    uint64_t id = icx_comm_id_of(comm, &rank, &nranks);
    icx_rec_comm(ICX_API_ncclCommRevoke, c.t0, comm, id, 0, rank, nranks, -1, flags, 0, rc);
    icx_ncall_exit(&c);
    return rc;
}

/* Polled in loops by non-blocking users: recorded only when it reports an error. */
ICX_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err)
{
    ICX_NCCL_BEGIN(ncclCommGetAsyncError, (comm, err));
    ncclResult_t rc = real(comm, err);
    icx_call_returned(&c);
    if (rc == ncclSuccess && err && *err == ncclSuccess) {
        /* a non-blocking communicator just became ready: NCCL has written its dumps now */
        uint64_t ready = 0;
        pthread_mutex_lock(&icx_ncomm_lock);
        struct icx_ncomm *p = icx_ncomm_find(comm);
        if (p && p->initializing) {
            p->initializing = 0;
            ready = p->id;
        }
        pthread_mutex_unlock(&icx_ncomm_lock);
        if (ready) {
            icx_dumps_collect(ready);
            icx_debug_collect();
        }
    }
    if (rc == ncclSuccess && err && *err != ncclSuccess && *err != ncclInProgress) {
        int rank = -1, nranks = -1;
        uint64_t id = icx_comm_id_of(comm, &rank, &nranks);
        icx_rec_comm(ICX_API_ncclCommGetAsyncError, c.t0, comm, id, 0, rank, nranks, -1, 0, 0,
                     *err);
    }
    icx_ncall_exit(&c);
    return rc;
}

/* Buffer registration: the size, as an NCCL_CALL with no sequence number. */
#define ICX_NCCL_REG(name, params, args, comm, size)                                               \
    ICX_EXPORT ncclResult_t name params                                                            \
    {                                                                                              \
        ICX_NCCL_BEGIN(name, args);                                                                \
        ncclResult_t rc = real args;                                                               \
        icx_call_returned(&c);                                                                     \
        icx_rec_call(ICX_API_##name, c.t0, 0, comm, size, ncclUint8, -1, -1, 0, NULL, rc, 0);      \
        icx_ncall_exit(&c);                                                                         \
        return rc;                                                                                 \
    }
ICX_NCCL_REG(ncclCommRegister, (const ncclComm_t cm, void *b, size_t n, void **h), (cm, b, n, h),
             cm, n)
ICX_NCCL_REG(ncclCommDeregister, (const ncclComm_t cm, void *h), (cm, h), cm, 0)
ICX_NCCL_REG(ncclCommWindowRegister, (ncclComm_t cm, void *b, size_t n, ncclWindow_t *w, int f),
             (cm, b, n, w, f), cm, n)
ICX_NCCL_REG(ncclCommWindowDeregister, (ncclComm_t cm, ncclWindow_t w), (cm, w), cm, 0)
#undef ICX_NCCL_REG

/* The queries: recorded with their answer as `count` (0 when they failed); no sequence number.
 * The tracer's own questions go to the real functions directly and are not recorded. */
#define ICX_NCCL_QUERY(name)                                                                       \
    ICX_EXPORT ncclResult_t name(const ncclComm_t cm, int *out)                                    \
    {                                                                                              \
        ICX_NCCL_BEGIN(name, (cm, out));                                                           \
        ncclResult_t rc = real(cm, out);                                                           \
        icx_call_returned(&c);                                                                     \
        icx_rec_call(ICX_API_##name, c.t0, 0, cm, rc == ncclSuccess && out ? (size_t)*out : 0, -1, \
                     -1, -1, 0, NULL, rc, 0);                                                      \
        icx_ncall_exit(&c);                                                                        \
        return rc;                                                                                 \
    }
ICX_NCCL_QUERY(ncclCommCount)
ICX_NCCL_QUERY(ncclCommCuDevice)
ICX_NCCL_QUERY(ncclCommUserRank)
#undef ICX_NCCL_QUERY

/* Ends a group without launching it: the group is over for our bookkeeping too. */
ICX_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *info)
{
    icx_real_ncclGroupSimulateEnd_t real = ICX_NCCL_REAL(ncclGroupSimulateEnd);
    if (!real)
        return ncclSystemError;
    ncclResult_t rc = real(info);
    if (!icx_nccl_guard && icx_group_depth > 0 && --icx_group_depth == 0)
        icx_group_nstreams = 0;
    return rc;
}

/* ---- dlsym (dl.c asks): a program that looks NCCL up itself (ctypes) gets the wrappers ---- */

void *icx_dl_wrap_nccl(const char *name, const char *version, void *handle)
{
    static const struct {
        const char *name;
        void *wrapper;
    } w[] = {
#define W(n) {#n, (void *)n}
        W(ncclAllReduce), W(ncclBroadcast), W(ncclBcast), W(ncclReduce), W(ncclAllGather),
        W(ncclReduceScatter), W(ncclAlltoAll), W(ncclGather), W(ncclScatter), W(ncclSend),
        W(ncclRecv), W(ncclGroupStart), W(ncclGroupEnd), W(ncclCommInitRank),
        W(ncclCommInitRankConfig), W(ncclCommSplit), W(ncclCommDestroy), W(ncclCommAbort),
        W(ncclCommFinalize), W(ncclGetUniqueId), W(ncclCommInitAll),
        W(ncclCommInitRankScalable), W(ncclCommShrink), W(ncclCommRevoke),
        W(ncclCommGetAsyncError), W(ncclCommRegister), W(ncclCommDeregister),
        W(ncclCommWindowRegister), W(ncclCommWindowDeregister), W(ncclGroupSimulateEnd),
        W(ncclCommCount), W(ncclCommCuDevice), W(ncclCommUserRank),
#undef W
    };
    if (version || !atomic_load_explicit(&icx_active, memory_order_relaxed))
        return NULL; /* NCCL's symbols are not versioned */
    for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++)
        if (strcmp(name, w[i].name) == 0) {
            void *p = icx_dlsym_real(handle, name);
            return p && p != w[i].wrapper ? w[i].wrapper : NULL;
        }
    return NULL;
}
