/* NCCL: the communicator hooks (creation, split, shrink, finalize, destroy, abort and the rest of
 * the communicator API) and the NCCL module entry.  Collectives, point-to-point and groups are in
 * nccl_coll.c, communicator ids and sequence numbers in nccl_comm.c, NCCL's own dumps in
 * nccl_dump.c.
 *
 * The real function is the library's pnccl* alias when it has one, else the next ncclX
 * (nccl_real.h).  NCCL calls some of its own public entry points (ncclBcast -> ncclBroadcast):
 * NCCL's own re-entry guard makes the inner one go straight through, so each user call is
 * recorded once, while the tracer-wide guard stays off and what NCCL does through other hooked
 * libraries on this thread -- libibverbs found with dlvsym, above all -- is traced. */
#include <errno.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlreal.h"
#include "frame.h"
#include "gpu.h"
#include "hook.h"
#include "module.h"
#include "nccl_coll.h"
#include "nccl_comm.h"
#include "nccl_dump.h"
#include "nccl_prof.h"
#include "nccl_real.h"
#include "resolve.h"
#include "tbuf.h"

ICX_NCCL_DECL(ncclCommInitRank, (ncclComm_t *, int, ncclUniqueId, int));
ICX_NCCL_DECL(ncclCommInitRankConfig, (ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *));
ICX_NCCL_DECL(ncclCommInitRankScalable,
              (ncclComm_t *, int, int, int, ncclUniqueId *, ncclConfig_t *));
ICX_NCCL_DECL(ncclCommInitAll, (ncclComm_t *, int, const int *));
ICX_NCCL_DECL(ncclCommSplit, (ncclComm_t, int, int, ncclComm_t *, ncclConfig_t *));
ICX_NCCL_DECL(ncclCommShrink, (ncclComm_t, int *, int, ncclComm_t *, ncclConfig_t *, int));
ICX_NCCL_DECL(ncclCommFinalize, (ncclComm_t));
ICX_NCCL_DECL(ncclCommDestroy, (ncclComm_t));
ICX_NCCL_DECL(ncclCommAbort, (ncclComm_t));
ICX_NCCL_DECL(ncclCommRevoke, (ncclComm_t, int));
ICX_NCCL_DECL(ncclCommGetAsyncError, (ncclComm_t, ncclResult_t *));
ICX_NCCL_DECL(ncclGetUniqueId, (ncclUniqueId *));
ICX_NCCL_DECL(ncclCommRegister, (const ncclComm_t, void *, size_t, void **));
ICX_NCCL_DECL(ncclCommDeregister, (const ncclComm_t, void *));
ICX_NCCL_DECL(ncclCommWindowRegister, (ncclComm_t, void *, size_t, ncclWindow_t *, int));
ICX_NCCL_DECL(ncclCommWindowDeregister, (ncclComm_t, ncclWindow_t));
ICX_NCCL_DECL(ncclCommCount, (const ncclComm_t, int *));
ICX_NCCL_DECL(ncclCommCuDevice, (const ncclComm_t, int *));
ICX_NCCL_DECL(ncclCommUserRank, (const ncclComm_t, int *));

/* ---- records ---- */

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

/* ---- communicator lifecycle ---- */

static int icx_comm_device(ncclComm_t h)
{
    icx_real_ncclCommCuDevice_t f = ICX_NCCL_REAL(ncclCommCuDevice);
    int d = -1;
    if (!f || !h || f(h, &d) != ncclSuccess)
        return -1;
    return d;
}

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

static void icx_comm_created(enum icx_api api, uint64_t t0, ncclComm_t *out, uint64_t id,
                             uint64_t parent, int rank, int nranks, int color, int key,
                             ncclResult_t rc)
{
    /* ncclInProgress: a non-blocking communicator, usable once ncclCommGetAsyncError says so;
     * its handle is valid already. */
    ncclComm_t h = (rc == ncclSuccess || rc == ncclInProgress) && out ? *out : NULL;
    if (h)
        icx_ncomm_add(h, id, rank, nranks, rc == ncclInProgress);
    /* A non-blocking one cannot be asked yet: NCCL takes the caller's current device. */
    int dev = rc == ncclSuccess      ? icx_comm_device(h)
              : rc == ncclInProgress ? icx_current_device()
                                     : -1;
    icx_rec_comm(api, t0, h, id, parent, rank, nranks, dev, color, key, rc);
    if (rc == ncclSuccess) { /* (non-blocking: when ncclCommGetAsyncError first says ready) */
        icx_nccl_dumps_prepare();
        icx_nccl_dumps_collect(id);
    }
}

/* ncclCommInitRank and its Config twin differ only in the real call. */
ICX_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId uid, int rank)
{
    icx_real_ncclCommInitRank_t real = ICX_NCCL_REAL(ncclCommInitRank);
    struct icx_call c;
    if (!real)
        return ncclSystemError;
    if (!icx_call_begin(&c, &icx_nccl_guard))
        return real(comm, nranks, uid, rank);
    icx_nccl_dumps_prepare();
    ncclResult_t rc = real(comm, nranks, uid, rank);
    icx_call_returned(&c);
    icx_comm_created(ICX_API_ncclCommInitRank, c.t0, comm,
                     icx_fnv(&uid, sizeof(uid), ICX_FNV_BASIS), 0, rank, nranks, 0, 0, rc);
    icx_call_end(&c);
    return rc;
}

ICX_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId uid,
                                               int rank, ncclConfig_t *config)
{
    icx_real_ncclCommInitRankConfig_t real = ICX_NCCL_REAL(ncclCommInitRankConfig);
    struct icx_call c;
    if (!real)
        return ncclSystemError;
    if (!icx_call_begin(&c, &icx_nccl_guard))
        return real(comm, nranks, uid, rank, config);
    icx_nccl_dumps_prepare();
    ncclResult_t rc = real(comm, nranks, uid, rank, config);
    icx_call_returned(&c);
    icx_comm_created(ICX_API_ncclCommInitRankConfig, c.t0, comm,
                     icx_fnv(&uid, sizeof(uid), ICX_FNV_BASIS), 0, rank, nranks, 0, 0, rc);
    icx_call_end(&c);
    return rc;
}

ICX_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t *comm, int nranks, int rank, int nid,
                                                 ncclUniqueId *ids, ncclConfig_t *config)
{
    icx_real_ncclCommInitRankScalable_t real = ICX_NCCL_REAL(ncclCommInitRankScalable);
    struct icx_call c;
    if (!real)
        return ncclSystemError;
    if (!icx_call_begin(&c, &icx_nccl_guard))
        return real(comm, nranks, rank, nid, ids, config);
    icx_nccl_dumps_prepare();
    ncclResult_t rc = real(comm, nranks, rank, nid, ids, config);
    icx_call_returned(&c);
    uint64_t id = nid > 0 && ids ? icx_fnv(ids, sizeof(*ids) * (size_t)nid, ICX_FNV_BASIS) : 0;
    icx_comm_created(ICX_API_ncclCommInitRankScalable, c.t0, comm, id, 0, rank, nranks, 0, 0, rc);
    icx_call_end(&c);
    return rc;
}

/* One process holds every rank: an id unique to this call is the same for all of them. */
ICX_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    icx_real_ncclCommInitAll_t real = ICX_NCCL_REAL(ncclCommInitAll);
    struct icx_call c;
    static _Atomic uint64_t calls;
    if (!real)
        return ncclSystemError;
    if (!icx_call_begin(&c, &icx_nccl_guard))
        return real(comms, ndev, devlist);
    icx_nccl_dumps_prepare();
    ncclResult_t rc = real(comms, ndev, devlist);
    icx_call_returned(&c);
    uint64_t n = atomic_fetch_add(&calls, 1) + 1, pid = (uint64_t)getpid();
    uint64_t id = icx_fnv(&n, sizeof(n), icx_fnv(&pid, sizeof(pid), 0xa11));
    for (int i = 0; i < ndev; i++)
        icx_comm_created(ICX_API_ncclCommInitAll, c.t0, &comms[i], id, 0, i, ndev, 0, 0, rc);
    icx_call_end(&c);
    return rc;
}

/* Every rank of the parent splits in the same order: (parent id, split count, color) names the
 * child on all of them. */
ICX_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                      ncclConfig_t *config)
{
    icx_real_ncclCommSplit_t real = ICX_NCCL_REAL(ncclCommSplit);
    struct icx_call c;
    if (!real)
        return ncclSystemError;
    if (!icx_call_begin(&c, &icx_nccl_guard))
        return real(comm, color, key, newcomm, config);
    ncclResult_t rc = real(comm, color, key, newcomm, config);
    icx_call_returned(&c);
    uint64_t parent, n = icx_ncomm_split(comm, &parent);
    uint64_t id = icx_fnv(&n, sizeof(n), icx_fnv(&color, sizeof(color), parent ^ 0x5157));
    int rank = -1, nranks = -1;
    if (rc == ncclSuccess && newcomm)
        icx_comm_shape(*newcomm, &rank, &nranks);
    icx_comm_created(ICX_API_ncclCommSplit, c.t0, newcomm, id, parent, rank, nranks, color, key,
                     rc);
    icx_call_end(&c);
    return rc;
}

/* Every remaining rank shrinks the same parent the same way: (parent, its split count, the
 * excluded ranks) names the child on all of them. */
ICX_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int *excl, int nexcl, ncclComm_t *newcomm,
                                       ncclConfig_t *config, int flags)
{
    icx_real_ncclCommShrink_t real = ICX_NCCL_REAL(ncclCommShrink);
    struct icx_call c;
    if (!real)
        return ncclSystemError;
    if (!icx_call_begin(&c, &icx_nccl_guard))
        return real(comm, excl, nexcl, newcomm, config, flags);
    ncclResult_t rc = real(comm, excl, nexcl, newcomm, config, flags);
    icx_call_returned(&c);
    uint64_t parent, n = icx_ncomm_split(comm, &parent);
    uint64_t id = icx_fnv(&n, sizeof(n), parent ^ 0x5badull);
    if (excl && nexcl > 0)
        id = icx_fnv(excl, sizeof(int) * (size_t)nexcl, id);
    int rank = -1, nranks = -1;
    if (rc == ncclSuccess && newcomm)
        icx_comm_shape(*newcomm, &rank, &nranks);
    icx_comm_created(ICX_API_ncclCommShrink, c.t0, newcomm, id, parent, rank, nranks, nexcl, flags,
                     rc);
    icx_call_end(&c);
    return rc;
}

/* Finalize, destroy, abort: a communicator's end (finalize keeps it known: destroy follows). */
static ncclResult_t icx_comm_end(enum icx_api api, ncclResult_t (*real)(ncclComm_t), ncclComm_t h)
{
    struct icx_call c;
    if (!real)
        return ncclSystemError;
    if (!icx_call_begin(&c, &icx_nccl_guard))
        return real(h);
    int rank = -1, nranks = -1;
    uint64_t id = icx_ncomm_id(h, &rank, &nranks);
    ncclResult_t rc = real(h);
    icx_call_returned(&c);
    if (api != ICX_API_ncclCommFinalize)
        icx_ncomm_forget(h);
    icx_rec_comm(api, c.t0, h, id, 0, rank, nranks, -1, 0, 0, rc);
    icx_call_end(&c);
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

/* The id its communicator will have on every rank: where the job's bootstrap began. */
ICX_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *uid)
{
    icx_real_ncclGetUniqueId_t real = ICX_NCCL_REAL(ncclGetUniqueId);
    struct icx_call c;
    if (!real)
        return ncclSystemError;
    if (!icx_call_begin(&c, &icx_nccl_guard))
        return real(uid);
    ncclResult_t rc = real(uid);
    icx_call_returned(&c);
    icx_rec_comm(ICX_API_ncclGetUniqueId, c.t0, NULL,
                 rc == ncclSuccess ? icx_fnv(uid, sizeof(*uid), ICX_FNV_BASIS) : 0, 0, -1, -1, -1,
                 0, 0, rc);
    icx_call_end(&c);
    return rc;
}

ICX_EXPORT ncclResult_t ncclCommRevoke(ncclComm_t comm, int flags)
{
    icx_real_ncclCommRevoke_t real = ICX_NCCL_REAL(ncclCommRevoke);
    struct icx_call c;
    if (!real)
        return ncclSystemError;
    if (!icx_call_begin(&c, &icx_nccl_guard))
        return real(comm, flags);
    ncclResult_t rc = real(comm, flags);
    icx_call_returned(&c);
    int rank = -1, nranks = -1;
    uint64_t id = icx_ncomm_id(comm, &rank, &nranks);
    icx_rec_comm(ICX_API_ncclCommRevoke, c.t0, comm, id, 0, rank, nranks, -1, flags, 0, rc);
    icx_call_end(&c);
    return rc;
}

/* Polled in loops by non-blocking users: recorded only when it reports an error; the first time a
 * non-blocking communicator reports ready, NCCL has written its dumps. */
ICX_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err)
{
    icx_real_ncclCommGetAsyncError_t real = ICX_NCCL_REAL(ncclCommGetAsyncError);
    struct icx_call c;
    if (!real)
        return ncclSystemError;
    if (!icx_call_begin(&c, &icx_nccl_guard))
        return real(comm, err);
    ncclResult_t rc = real(comm, err);
    icx_call_returned(&c);
    if (rc == ncclSuccess && err && *err == ncclSuccess) {
        uint64_t ready = icx_ncomm_ready(comm);
        if (ready)
            icx_nccl_dumps_collect(ready);
    }
    if (rc == ncclSuccess && err && *err != ncclSuccess && *err != ncclInProgress) {
        int rank = -1, nranks = -1;
        uint64_t id = icx_ncomm_id(comm, &rank, &nranks);
        icx_rec_comm(ICX_API_ncclCommGetAsyncError, c.t0, comm, id, 0, rank, nranks, -1, 0, 0,
                     *err);
    }
    icx_call_end(&c);
    return rc;
}

/* Buffer registration and the queries: an NCCL_CALL record with no sequence number (the queries
 * with their answer as `count`, 0 when they failed).  The tracer's own questions go to the real
 * functions directly and are not recorded. */
static ncclResult_t icx_nccl_other_end(struct icx_call *c, enum icx_api api, ncclComm_t cm,
                                       size_t count, int dt, ncclResult_t rc)
{
    icx_nccl_rec_other(api, c->t0, cm, count, dt, rc);
    icx_call_end(c);
    return rc;
}

ICX_EXPORT ncclResult_t ncclCommRegister(const ncclComm_t cm, void *b, size_t n, void **h)
{
    icx_real_ncclCommRegister_t real = ICX_NCCL_REAL(ncclCommRegister);
    struct icx_call c;
    if (!real)
        return ncclSystemError;
    if (!icx_call_begin(&c, &icx_nccl_guard))
        return real(cm, b, n, h);
    ncclResult_t rc = real(cm, b, n, h);
    icx_call_returned(&c);
    return icx_nccl_other_end(&c, ICX_API_ncclCommRegister, cm, n, ncclUint8, rc);
}

ICX_EXPORT ncclResult_t ncclCommDeregister(const ncclComm_t cm, void *h)
{
    icx_real_ncclCommDeregister_t real = ICX_NCCL_REAL(ncclCommDeregister);
    struct icx_call c;
    if (!real)
        return ncclSystemError;
    if (!icx_call_begin(&c, &icx_nccl_guard))
        return real(cm, h);
    ncclResult_t rc = real(cm, h);
    icx_call_returned(&c);
    return icx_nccl_other_end(&c, ICX_API_ncclCommDeregister, cm, 0, ncclUint8, rc);
}

ICX_EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t cm, void *b, size_t n, ncclWindow_t *w,
                                               int f)
{
    icx_real_ncclCommWindowRegister_t real = ICX_NCCL_REAL(ncclCommWindowRegister);
    struct icx_call c;
    if (!real)
        return ncclSystemError;
    if (!icx_call_begin(&c, &icx_nccl_guard))
        return real(cm, b, n, w, f);
    ncclResult_t rc = real(cm, b, n, w, f);
    icx_call_returned(&c);
    return icx_nccl_other_end(&c, ICX_API_ncclCommWindowRegister, cm, n, ncclUint8, rc);
}

ICX_EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t cm, ncclWindow_t w)
{
    icx_real_ncclCommWindowDeregister_t real = ICX_NCCL_REAL(ncclCommWindowDeregister);
    struct icx_call c;
    if (!real)
        return ncclSystemError;
    if (!icx_call_begin(&c, &icx_nccl_guard))
        return real(cm, w);
    ncclResult_t rc = real(cm, w);
    icx_call_returned(&c);
    return icx_nccl_other_end(&c, ICX_API_ncclCommWindowDeregister, cm, 0, ncclUint8, rc);
}

/* The three queries differ only in the real function asked and the API recorded. */
static ncclResult_t icx_nccl_query(enum icx_api api, ncclResult_t (*real)(const ncclComm_t, int *),
                                   const ncclComm_t cm, int *out)
{
    struct icx_call c;
    if (!real)
        return ncclSystemError;
    if (!icx_call_begin(&c, &icx_nccl_guard))
        return real(cm, out);
    ncclResult_t rc = real(cm, out);
    icx_call_returned(&c);
    return icx_nccl_other_end(&c, api, cm, rc == ncclSuccess && out ? (size_t)*out : 0, -1, rc);
}

ICX_EXPORT ncclResult_t ncclCommCount(const ncclComm_t cm, int *out)
{
    return icx_nccl_query(ICX_API_ncclCommCount, ICX_NCCL_REAL(ncclCommCount), cm, out);
}

ICX_EXPORT ncclResult_t ncclCommCuDevice(const ncclComm_t cm, int *out)
{
    return icx_nccl_query(ICX_API_ncclCommCuDevice, ICX_NCCL_REAL(ncclCommCuDevice), cm, out);
}

ICX_EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t cm, int *out)
{
    return icx_nccl_query(ICX_API_ncclCommUserRank, ICX_NCCL_REAL(ncclCommUserRank), cm, out);
}

/* ---- the module ---- */

/* dlsym (dl.c asks): a program that looks NCCL up itself (ctypes) gets the wrappers of
 * wraps_nccl.def. */
static void *icx_nccl_dl_wrap(const char *name, const char *version, void *handle)
{
    static const struct {
        const char *name;
        void *wrapper;
    } w[] = {
#define ICX_WRAP(n) {#n, (void *)n},
#include "wraps_nccl.def"
#undef ICX_WRAP
    };
    if (version || !atomic_load_explicit(&icx_active, memory_order_relaxed))
        return NULL; /* NCCL's symbols are not versioned */
    if (strncmp(name, "ncclProfiler_v", 14) == 0)
        return icx_nprof_dl_wrap(name, handle); /* NCCL looking up a profiler plugin */
    for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++)
        if (strcmp(name, w[i].name) == 0) {
            void *p = icx_dlsym_real(handle, name);
            return p && p != w[i].wrapper ? w[i].wrapper : NULL;
        }
    return NULL;
}

static void icx_nccl_tick(struct icx_frame *f, enum icx_tick_kind kind)
{
    (void)kind;
    icx_nccl_dumps_put(f);
    icx_nprof_tick(f);
}

/* Lock order: the communicator table, the dump queue, the profiler's proxy table. */
static void icx_nccl_fork_prepare(void)
{
    icx_ncomm_fork_prepare();
    icx_nccl_dumps_fork_prepare();
    icx_nprof_fork_prepare();
}

static void icx_nccl_fork_parent(void)
{
    icx_nprof_fork_parent();
    icx_nccl_dumps_fork_parent();
    icx_ncomm_fork_parent();
}

/* A group the parent had open is not the child's. */
static void icx_nccl_fork_child(void)
{
    icx_nprof_fork_child();
    icx_nccl_dumps_fork_child();
    icx_ncomm_fork_child();
    icx_nccl_groups_fork_child();
}

const struct icx_module icx_mod_nccl = {
    .name = "nccl",
    .init = icx_nprof_setup,
    .tick = icx_nccl_tick,
    .dl_prefix = "nccl",
    .dl_wrap = icx_nccl_dl_wrap,
    .fork_prepare = icx_nccl_fork_prepare,
    .fork_parent = icx_nccl_fork_parent,
    .fork_child = icx_nccl_fork_child,
    .fini = icx_nccl_dumps_fini,
};
