/* The simulated libnccl's profiler plugin host, as NCCL 2.27-2.29 loads one
 * (src/plugin/profiler.cc): at the first communicator, the library named by NCCL_PROFILER_PLUGIN
 * (tried as given, then as libnccl-profiler-NAME.so; unset: libnccl-profiler.so; STATIC_PLUGIN:
 * dlopen(NULL), the global scope) is dlopen'ed RTLD_NOW | RTLD_LOCAL and searched for
 * ncclProfiler_v6, then _v5, then _v4 (v6 only when the library emulates NCCL 2.29 or later:
 * ICXSIM_NCCL_PROFILER_MAX, default from nccl.h's version, 5 for 2.28).  One plugin per process.
 * Each communicator calls init, which returns the activation mask; finalize at destroy or abort.
 *
 * Events: a collective event per collective when it is enqueued (start and stop at once: its stop
 * means "enqueued"), with the algorithm, protocol, channels and warps the library chose
 * (sim_nprof_choose: what NCCL's tuner would pick, by size), and, when the work has run, one
 * kernel-channel event per channel, child of the collective, with start and stop times of the
 * simulated GPU's globaltimer: the host's CLOCK_MONOTONIC plus a per-device offset, so that only
 * durations mean anything, as on a GPU. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "icx/nccl_profiler_abi.h"
#include "nccl_sim.h"

static int prof_state; /* 0: not tried, 1: loaded, -1: none */
static int prof_version;
static const icx_nprof_v5_t *prof5; /* v5 and v6 */
static const icx_nprof_v4_t *prof4;
static pthread_mutex_t prof_lock = PTHREAD_MUTEX_INITIALIZER;

static void prof_log(int level, unsigned long flags, const char *file, int line, const char *fmt,
                     ...)
{
    (void)level, (void)flags, (void)file, (void)line, (void)fmt; /* NCCL_DEBUG is not modelled */
}

static void *prof_open(const char *name)
{
    if (!strcasecmp(name, "STATIC_PLUGIN"))
        return dlopen(NULL, RTLD_NOW | RTLD_LOCAL);
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h && !strchr(name, '/')) {
        char alt[4096];
        snprintf(alt, sizeof(alt), "libnccl-profiler-%s.so", name);
        h = dlopen(alt, RTLD_NOW | RTLD_LOCAL);
    }
    return h;
}

static void prof_load(void)
{
    pthread_mutex_lock(&prof_lock);
    if (prof_state == 0) {
        const char *env = getenv("NCCL_PROFILER_PLUGIN");
        void *h = prof_open(env && env[0] ? env : "libnccl-profiler.so");
        const char *mx = getenv("ICXSIM_NCCL_PROFILER_MAX");
        int max = mx ? atoi(mx) : NCCL_VERSION_CODE >= 22902 ? 6 : 5;
        prof_state = -1;
        for (int v = max; h && v >= 4 && prof_state < 0; v--) {
            char sym[32];
            snprintf(sym, sizeof(sym), "ncclProfiler_v%d", v);
            void *p = dlsym(h, sym);
            if (!p)
                continue;
            prof_version = v;
            if (v >= 5)
                prof5 = p;
            else
                prof4 = p;
            prof_state = 1;
        }
    }
    pthread_mutex_unlock(&prof_lock);
}

void sim_nprof_comm_init(ncclComm_t c)
{
    prof_load();
    c->prof_ctx = NULL;
    c->prof_mask = 0;
    if (prof_state != 1)
        return;
    ncclResult_t rc = prof5 ? prof5->init(&c->prof_ctx, c->id, &c->prof_mask, "", c->nodes,
                                          c->nranks, c->rank, prof_log)
                            : prof4->init(&c->prof_ctx, &c->prof_mask, "", c->id, c->nodes,
                                          c->nranks, c->rank, prof_log);
    if (rc != ncclSuccess)
        c->prof_mask = 0; /* NCCL disables the plugin for the communicator */
}

/* The ground truth of c's launches, one line per (algorithm, protocol), appended to
 * $ICXSIM_NPROF_TRUTH.<pid>: "<commId hex> <algo> <proto> <collectives> <channels>". */
static void truth_write(ncclComm_t c)
{
    const char *out = getenv("ICXSIM_NPROF_TRUTH");
    if (!out)
        return;
    char path[4096];
    snprintf(path, sizeof(path), "%s.%d", out, (int)getpid());
    FILE *f = fopen(path, "a");
    for (int i = 0; f && i < 8 && c->chose[i].algo; i++)
        fprintf(f, "%016llx %s %s %llu %llu\n", (unsigned long long)c->id, c->chose[i].algo,
                c->chose[i].proto, (unsigned long long)c->chose[i].colls,
                (unsigned long long)c->chose[i].channels);
    if (f)
        fclose(f);
}

void sim_nprof_comm_fini(ncclComm_t c)
{
    truth_write(c);
    if (prof_state == 1 && c->prof_mask) {
        if (prof5)
            prof5->finalize(c->prof_ctx);
        else
            prof4->finalize(c->prof_ctx);
    }
    c->prof_mask = 0;
}

void sim_nprof_choose(int coll, uint64_t bytes, int nranks, int local, struct sim_nprof_choice *out)
{
    out->algo = coll == C_ALLREDUCE && nranks > 1 && bytes <= (256u << 10) ? "Tree" : "Ring";
    out->proto = bytes < (64u << 10) ? "LL" : bytes < (2u << 20) ? "LL128" : "Simple";
    out->channels = local > 1 ? local : 1; /* one ring per local GPU, as the network's */
    out->warps = bytes < (64u << 10) ? 8 : 16;
}

static const char *const coll_names[] = {
    [C_ALLREDUCE] = "AllReduce",
    [C_BROADCAST] = "Broadcast",
    [C_REDUCE] = "Reduce",
    [C_ALLGATHER] = "AllGather",
    [C_REDUCESCATTER] = "ReduceScatter",
    [C_ALLTOALL] = "AllToAll",
    [C_GATHER] = "Gather",
    [C_SCATTER] = "Scatter",
};
static const char *const dt_names[] = {"ncclInt8",    "ncclUint8",   "ncclInt32",   "ncclUint32",
                                       "ncclInt64",   "ncclUint64",  "ncclFloat16", "ncclFloat32",
                                       "ncclFloat64", "ncclBfloat16"};

/* One event through whichever interface the plugin has: the v5 descriptor, or its v4 copy. */
static void *prof_start(ncclComm_t c, const icx_nprof_descr_v5_t *e)
{
    void *h = NULL;
    if (prof5) {
        prof5->startEvent(c->prof_ctx, &h, (icx_nprof_descr_v5_t *)e);
        return h;
    }
    icx_nprof_descr_v4_t e4 = {
        .type = (uint8_t)e->type, .parentObj = e->parentObj, .rank = e->rank};
    memcpy(&e4.coll, &e->coll, sizeof(e4.coll)); /* the union, whichever member */
    prof4->startEvent(c->prof_ctx, &h, &e4);
    return h;
}

static void prof_stop(void *h, int state, icx_nprof_state_args_t *a)
{
    if (prof5) {
        if (a)
            prof5->recordEventState(h, state, a);
        prof5->stopEvent(h);
    } else {
        if (a)
            prof4->recordEventState(h, state, a);
        prof4->stopEvent(h);
    }
}

void *sim_nprof_coll(ncclComm_t c, uint64_t seq, int coll, const void *sb, void *rb, size_t count,
                     ncclDataType_t dt, int root, const struct sim_nprof_choice *ch)
{
    for (int i = 0; i < 8; i++)
        if (!c->chose[i].algo ||
            (!strcmp(c->chose[i].algo, ch->algo) && !strcmp(c->chose[i].proto, ch->proto))) {
            c->chose[i].algo = ch->algo;
            c->chose[i].proto = ch->proto;
            c->chose[i].colls++;
            c->chose[i].channels += (uint64_t)ch->channels;
            break;
        }
    if (!(c->prof_mask & ICX_NPROF_COLL))
        return NULL;
    icx_nprof_descr_v5_t e = {.type = ICX_NPROF_COLL, .rank = c->rank};
    e.coll = (struct icx_nprof_coll){seq,
                                     coll_names[coll],
                                     sb,
                                     rb,
                                     count,
                                     root,
                                     (unsigned)dt < 10 ? dt_names[dt] : "ncclFloat8",
                                     (uint8_t)ch->channels,
                                     (uint8_t)ch->warps,
                                     ch->algo,
                                     ch->proto,
                                     NULL};
    void *h = prof_start(c, &e);
    if (h)
        prof_stop(h, 0, NULL); /* "enqueued" */
    return h;
}

/* The simulated GPU's globaltimer: ns, from an epoch of the device's own. */
static uint64_t gpu_timer(ncclComm_t c, uint64_t mono_ns)
{
    return mono_ns + (uint64_t)(c->dev + 1) * 1000000000000ull;
}

void sim_nprof_kernel(ncclComm_t c, void *coll, int channels, uint64_t start_ns, uint64_t end_ns)
{
    if (!coll || !(c->prof_mask & ICX_NPROF_KERNEL_CH))
        return;
    for (int ch = 0; ch < channels; ch++) {
        icx_nprof_descr_v5_t e = {.type = ICX_NPROF_KERNEL_CH, .parentObj = coll, .rank = c->rank};
        e.kernelCh = (struct icx_nprof_kernel_ch){(uint8_t)ch, gpu_timer(c, start_ns)};
        icx_nprof_state_args_t a = {.kernelCh = {gpu_timer(c, end_ns)}};
        void *h = prof_start(c, &e);
        if (h)
            prof_stop(h, ICX_NPROF_KERNEL_CH_STOP, &a);
    }
}

/* ---- the proxy's network transfers ---- */

static void prof_record(void *h, int state, icx_nprof_state_args_t *a)
{
    if (prof5)
        prof5->recordEventState(h, state, a);
    else
        prof4->recordEventState(h, state, a);
}

struct sim_nprof_xfer *sim_nprof_proxy_begin(ncclComm_t c, void *coll, int channel, int peer,
                                             int is_send, uint64_t bytes, struct sim_nprof_xfer *x)
{
    x->op = x->step = NULL;
    if (!(c->prof_mask & ICX_NPROF_PROXY_OP))
        return x;
    icx_nprof_descr_v5_t e = {.type = ICX_NPROF_PROXY_OP, .parentObj = coll, .rank = c->rank};
    e.proxyOp =
        (struct icx_nprof_proxy_op){(int)getpid(), (uint8_t)channel, peer, 1, (int)bytes, is_send};
    x->op = prof_start(c, &e);
    if (!x->op)
        return x;
    prof_record(x->op, ICX_NPROF_OP_IN_PROGRESS, NULL);
    if (!(c->prof_mask & ICX_NPROF_PROXY_STEP))
        return x;
    icx_nprof_descr_v5_t s = {.type = ICX_NPROF_PROXY_STEP, .parentObj = x->op, .rank = c->rank};
    s.proxyStep.step = 0;
    x->step = prof_start(c, &s);
    if (!x->step)
        return x;
    icx_nprof_state_args_t a = {.proxyStep = {(size_t)bytes}};
    if (is_send) { /* the data is ready at once, the receiver's buffer too: on the wire */
        prof_record(x->step, ICX_NPROF_SEND_GPU_WAIT, NULL);
        prof_record(x->step, ICX_NPROF_SEND_PEER_WAIT, NULL);
        prof_record(x->step, ICX_NPROF_SEND_WAIT, &a);
    } else { /* waiting for the peer's data */
        prof_record(x->step, ICX_NPROF_RECV_WAIT, NULL);
    }
    return x;
}

void sim_nprof_proxy_end(ncclComm_t c, struct sim_nprof_xfer *x, int is_send, uint64_t bytes)
{
    (void)c;
    if (x->step) {
        if (!is_send) {
            icx_nprof_state_args_t a = {.proxyStep = {(size_t)bytes}};
            prof_record(x->step, ICX_NPROF_RECV_FLUSH_WAIT, &a);
            prof_record(x->step, ICX_NPROF_RECV_GPU_WAIT, NULL);
        }
        prof_stop(x->step, 0, NULL);
    }
    if (x->op)
        prof_stop(x->op, 0, NULL);
}
