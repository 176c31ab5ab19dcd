/* A user's own NCCL profiler plugin, for the chaining test: it counts what NCCL gives it and, at
 * each communicator's finalize, appends one line to $COUNT_PLUGIN_OUT.<pid>:
 *   <commId hex> <version> colls <n> kernel_channels <n> orphans <n> algo_missing <n>
 * orphans: kernel channels whose parent is not a collective handle this plugin made (a chaining
 * tracer that passed its own handle on would show here).  Exports v5 and v4 (NCCL takes v5). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "icx/nccl_profiler_abi.h"

#define MAGIC 0x434f554eu

struct ctx {
    uint64_t comm_id;
    int version;
    pthread_mutex_t lock;
    unsigned long colls, kchs, orphans, algo_missing;
};

struct ev {
    unsigned magic;
    int kind; /* 1 coll, 2 kernel channel */
    struct ctx *c;
};

static ncclResult_t count_init(int version, void **context, uint64_t id, int *mask)
{
    struct ctx *c = calloc(1, sizeof(*c));
    if (!c)
        return ncclSystemError;
    c->comm_id = id;
    c->version = version;
    pthread_mutex_init(&c->lock, NULL);
    *context = c;
    *mask = ICX_NPROF_COLL | ICX_NPROF_KERNEL_CH | ICX_NPROF_PROXY_OP;
    return ncclSuccess;
}

static ncclResult_t init_v5(void **context, uint64_t id, int *mask, const char *name, int nnodes,
                            int nranks, int rank, icx_nccl_logger_t logfn)
{
    (void)name, (void)nnodes, (void)nranks, (void)rank, (void)logfn;
    return count_init(5, context, id, mask);
}

static ncclResult_t init_v4(void **context, int *mask, const char *name, uint64_t id, int nnodes,
                            int nranks, int rank, icx_nccl_logger_t logfn)
{
    (void)name, (void)nnodes, (void)nranks, (void)rank, (void)logfn;
    return count_init(4, context, id, mask);
}

static ncclResult_t start(struct ctx *c, void **handle, uint64_t type, void *parent,
                          const char *algo)
{
    *handle = NULL;
    if (type != ICX_NPROF_COLL && type != ICX_NPROF_KERNEL_CH)
        return ncclSuccess;
    struct ev *e = malloc(sizeof(*e));
    if (!e)
        return ncclSuccess;
    *e = (struct ev){MAGIC, type == ICX_NPROF_COLL ? 1 : 2, c};
    pthread_mutex_lock(&c->lock);
    if (e->kind == 1) {
        c->colls++;
        c->algo_missing += !algo || !algo[0];
    } else {
        const struct ev *p = parent;
        c->kchs++;
        c->orphans += !p || p->magic != MAGIC || p->kind != 1;
    }
    pthread_mutex_unlock(&c->lock);
    *handle = e;
    return ncclSuccess;
}

static ncclResult_t start_v5(void *context, void **handle, icx_nprof_descr_v5_t *d)
{
    return start(context, handle, d->type, d->parentObj,
                 d->type == ICX_NPROF_COLL ? d->coll.algo : NULL);
}

static ncclResult_t start_v4(void *context, void **handle, icx_nprof_descr_v4_t *d)
{
    return start(context, handle, d->type, d->parentObj,
                 d->type == ICX_NPROF_COLL ? d->coll.algo : NULL);
}

/* Collectives are kept (their kernel channels name them later); channels are freed. */
static ncclResult_t stop(void *handle)
{
    struct ev *e = handle;
    if (e && e->kind == 2) {
        e->magic = 0;
        free(e);
    }
    return ncclSuccess;
}

static ncclResult_t state(void *handle, int s, icx_nprof_state_args_t *args)
{
    (void)handle, (void)s, (void)args;
    return ncclSuccess;
}

static ncclResult_t finalize(void *context)
{
    struct ctx *c = context;
    const char *out = getenv("COUNT_PLUGIN_OUT");
    if (out) {
        char path[4096];
        snprintf(path, sizeof(path), "%s.%d", out, (int)getpid());
        FILE *f = fopen(path, "a");
        if (f) {
            fprintf(f, "%016llx %d colls %lu kernel_channels %lu orphans %lu algo_missing %lu\n",
                    (unsigned long long)c->comm_id, c->version, c->colls, c->kchs, c->orphans,
                    c->algo_missing);
            fclose(f);
        }
    }
    return ncclSuccess; /* the context is kept: its collectives' handles point at it */
}

const icx_nprof_v5_t ncclProfiler_v5 = {"count", init_v5, start_v5, stop, state, finalize};
const icx_nprof_v4_t ncclProfiler_v4 = {"count", init_v4, start_v4, stop, state, finalize};
