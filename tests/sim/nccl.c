/* Simulated libnccl.so.2 (test substrate; the tracer never includes it).  Compiled against the real
 * nccl.h; like the real library it defines pnccl* and exports nccl* as weak aliases of them, and
 * some entry points call others through their public names (ncclBcast -> ncclBroadcast).
 *
 * Ranks are separate processes.  ncclCommInitRank maps a shared-memory segment named after the
 * unique id; every collective really moves and reduces the ranks' data through it (device memory
 * of the simulated libcudart is host memory): each rank copies its input into its slot, all meet at
 * a barrier, each computes its output from the slots, and all meet again.  Send/recv go through
 * per-pair mailboxes; calls between ncclGroupStart/End run at the outermost GroupEnd, sends first.
 * What a ring would send across nodes also goes through libibverbs (nccl_ib.c), as NCCL's IB
 * transport sends it.
 *
 * Timing: the link model of $ICXSIM_TOPOLOGY.  A collective takes latency + bus bytes / link rate
 * from the moment the last rank arrived (the ring's slowest link: NVLink within a node, across
 * nodes one NIC per channel, from the `nic` lines), with nccl-tests' bus-bandwidth factors.  A
 * rank's network share is on the wire for share / its NIC's rate from that moment (its proxy
 * steps stay open so long, the receiver's too: a slow NIC keeps its channel waiting).  As in
 * real NCCL a call only enqueues its work on the caller's stream (cudaLaunchHostFunc of the
 * simulated libcudart) and returns; the stream's worker does it, so events recorded around a call
 * time it and cudaStreamSynchronize waits for it.  A group runs as one unit on the stream of its
 * first call.  Argument errors are returned by the call; errors found while running are reported by
 * ncclCommGetAsyncError.  Limits: one
 * collective's per-rank data up to SLOT bytes; sum/prod/max/min/avg on int32/uint32/int64/uint64/
 * float/double; $ICXSIM_NODE tells which node a rank is on.  Ranks whose calls of one collective
 * instance disagree (op, count, type, reduction, root) hang in it, as with real NCCL. */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <nccl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "counters.h"
#include "nccl_sim.h"
#include "topo_file.h"

#define SIM_EXPORT __attribute__((visibility("default")))
#define SLOT (4u << 20)
#define MBOX (1u << 20)
#define NCCL_ALIAS(name) __attribute__((weak, alias("p" #name)))
#define HDR ((sizeof(struct shm) + 4095) & ~(size_t)4095)

struct op {
    int kind; /* 0 coll, 1 send, 2 recv */
    int coll;
    const void *sb;
    void *rb;
    size_t count;
    ncclDataType_t dt;
    ncclRedOp_t red;
    int root;
    ncclComm_t comm;
    cudaStream_t stream;
    int bootstrap; /* the library's own exchange (split): over the bootstrap, not the network */
    void *prof;    /* its profiler plugin collective event (nccl_prof.c), NULL: none */
    int prof_channels;
};

struct batch { /* what one host function runs: a call, or a group */
    size_t n;
    struct op op[];
};

static struct sim_topo topo;
static int topo_loaded;
static struct sim_counters *nvl_counters; /* the node's simulated NVLink counters (NULL: none) */
static __thread int group_depth;
static __thread struct op *queue;
static __thread size_t nqueue, capqueue;

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void pause_briefly(unsigned *spins)
{
    if (++*spins > 200)
        usleep(20);
}

static char *slot(ncclComm_t c, int r)
{
    return (char *)c->s + HDR + (size_t)r * SLOT;
}
static char *mbox(ncclComm_t c, int src, int dst)
{
    return slot(c, c->nranks) + ((size_t)src * (size_t)c->nranks + (size_t)dst) * MBOX;
}

int sim_barrier(ncclComm_t c)
{
    struct shm *s = c->s;
    uint32_t gen = atomic_load(&s->gen);
    if (atomic_fetch_add(&s->count, 1) == (uint32_t)c->nranks - 1) {
        atomic_store(&s->count, 0);
        atomic_store(&s->release_ns, now_ns());
        atomic_fetch_add(&s->gen, 1);
        return 0;
    }
    unsigned spins = 0;
    while (atomic_load(&s->gen) == gen)
        if (atomic_load(&c->aborted))
            return -1;
        else
            pause_briefly(&spins);
    return 0;
}

static size_t dt_size(ncclDataType_t t)
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
    default: return 1;
    }
}

#define RED(T)                                                                                     \
    do {                                                                                           \
        T *o = (T *)out;                                                                           \
        const T *x = (const T *)in;                                                                \
        for (size_t i = 0; i < n; i++)                                                             \
            o[i] = op == ncclProd  ? o[i] * x[i]                                                   \
                   : op == ncclMax ? (o[i] > x[i] ? o[i] : x[i])                                   \
                   : op == ncclMin ? (o[i] < x[i] ? o[i] : x[i])                                   \
                                   : o[i] + x[i];                                                  \
    } while (0)

static ncclResult_t reduce_into(void *out, const void *in, size_t n, ncclDataType_t t,
                                ncclRedOp_t op)
{
    switch (t) {
    case ncclInt32: RED(int32_t); break;
    case ncclUint32: RED(uint32_t); break;
    case ncclInt64: RED(int64_t); break;
    case ncclUint64: RED(uint64_t); break;
    case ncclFloat32: RED(float); break;
    case ncclFloat64: RED(double); break;
    default: return ncclInvalidArgument;
    }
    return ncclSuccess;
}

static void average(void *out, size_t n, ncclDataType_t t, int nranks)
{
    for (size_t i = 0; i < n; i++) {
        if (t == ncclFloat32)
            ((float *)out)[i] /= (float)nranks;
        else if (t == ncclFloat64)
            ((double *)out)[i] /= nranks;
        else if (t == ncclInt32)
            ((int32_t *)out)[i] /= nranks;
        else if (t == ncclInt64)
            ((int64_t *)out)[i] /= nranks;
    }
}

/* nccl-tests' bus bytes of one collective whose per-rank size is `bytes` (gathers and scatters:
 * one rank's share): what each rank of a ring sends to the next. */
static uint64_t bus_bytes(int coll, int nranks, uint64_t bytes)
{
    uint64_t n = (uint64_t)nranks;
    switch (coll) {
    case C_ALLREDUCE: return 2 * (n - 1) * bytes / n;
    case C_ALLGATHER:
    case C_REDUCESCATTER:
    case C_ALLTOALL:
    case C_GATHER:
    case C_SCATTER: return (n - 1) * bytes;
    default: return bytes;
    }
}

static void topo_once(void)
{
    if (!topo_loaded) {
        sim_topo_load(&topo);
        nvl_counters = sim_counters_map();
        topo_loaded = 1;
    }
}

/* NVLink traffic of this rank's part of a ring collective whose bus bytes are `bus`: on every
 * channel in which its successor is on the same node (all of them on one node; all but the one
 * leaving the node otherwise) it sends bus / channels to the next GPU of its node, and the
 * simulated NVLink counters count it, as the hardware counts NCCL's kernels' loads and stores. */
static void nvlink_ring(ncclComm_t c, uint64_t bus)
{
    int nl = 0, li = 0, me = c->rank, next = -1;
    for (int r = 0; r < c->nranks; r++)
        if (c->s->node[r] == c->s->node[me]) {
            nl++;
            li += r < me;
        }
    for (int r = 0, l = 0; r < c->nranks && nl > 1; r++)
        if (c->s->node[r] == c->s->node[me] && l++ == (li + 1) % nl)
            next = r;
    topo_once();
    if (next < 0 || !nvl_counters)
        return;
    int a = c->dev, b = c->s->dev[next];
    uint64_t edges = (uint64_t)(c->nodes > 1 ? nl - 1 : nl);
    sim_counters_add(nvl_counters, a, b, sim_topo_lanes(&topo, a, b), bus / (uint64_t)nl * edges);
}

/* NIC i's rate, bytes/s.  A NIC named in $ICXSIM_SLOW_NICS (the launcher's --slow-nic: its port
 * trained at 1x instead of 4x) runs at a quarter of its rate. */
static double one_nic_rate(int i)
{
    const char *slow = getenv("ICXSIM_SLOW_NICS");
    double r = topo.nic[i].rate_gbps * 1e9 / 8;
    const char *m = slow ? strstr(slow, topo.nic[i].name) : NULL;
    size_t len = strlen(topo.nic[i].name);
    if (m && (m == slow || m[-1] == ',') && (m[len] == 0 || m[len] == ','))
        r /= 4;
    return r;
}

/* The slowest NIC's rate, bytes/s (0: none): the ring's channel through it holds up the whole
 * collective on every node (the end barrier). */
static double nic_rate(void)
{
    double nic = 0;
    for (int i = 0; i < topo.nnics; i++) {
        double r = one_nic_rate(i);
        if (r > 0 && (nic == 0 || r < nic))
            nic = r;
    }
    return nic;
}

/* The rate of the NIC this rank's communicator opened, bytes/s (0: unknown). */
static double my_nic_rate(ncclComm_t c)
{
    topo_once();
    const char *name = c->ib.ctx && c->ib.ctx->device ? c->ib.ctx->device->name : "";
    for (int i = 0; i < topo.nnics; i++)
        if (!strcmp(topo.nic[i].name, name))
            return one_nic_rate(i);
    return 0;
}

/* Link-model duration (ns) of a collective (coll >= 0) or of a send (coll < 0; cross: between
 * nodes): bus bytes over the slowest link of the path.  Inside a node a GPU's NVSwitch links;
 * across nodes the ring has one channel per local GPU, each through its own NIC, so the rate is
 * that many NICs' unless NVLink is slower; a send between nodes uses one NIC. */
static uint64_t model_ns(ncclComm_t c, int coll, size_t bytes, int cross)
{
    topo_once();
    double bus = coll >= 0 ? (double)bus_bytes(coll, c->nranks, bytes) : (double)bytes;
    double nvl = topo.nvswitch_links * topo.nvlink_gbps * 1e9, rate = nvl, nic = nic_rate();
    if (coll >= 0 && c->nodes > 1 && nic > 0) {
        double ch = c->nranks / c->nodes;
        rate = ch * nic < nvl ? ch * nic : nvl;
    } else if (coll < 0 && cross && nic > 0) {
        rate = nic;
    }
    return (uint64_t)(topo.latency_us * 1e3 + bus / rate * 1e9);
}

static void wait_until(uint64_t t)
{
    struct timespec ts = {(time_t)(t / 1000000000ull), (long)(t % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* When `bytes` sent at `start` at `rate` (bytes/s) are through, no later than the collective's
 * modelled end. */
static uint64_t wire_end(uint64_t start, uint64_t bytes, double rate, uint64_t end)
{
    uint64_t t = start + (uint64_t)((double)bytes / rate * 1e9);
    return t < end ? t : end;
}

static ncclResult_t run_coll(const struct op *o)
{
    ncclComm_t c = o->comm;
    size_t es = dt_size(o->dt), n = o->count, b = n * es;
    int R = c->nranks, me = c->rank;
    size_t in_bytes = o->coll == C_ALLTOALL || o->coll == C_REDUCESCATTER ? b * (size_t)R
                      : o->coll == C_SCATTER && me == o->root             ? b * (size_t)R
                                                                          : b;
    if (in_bytes > SLOT)
        return ncclInvalidArgument;
    if (o->sb && (o->coll != C_SCATTER || me == o->root) &&
        (o->coll != C_BROADCAST || me == o->root))
        memcpy(slot(c, me), o->sb, in_bytes);
    /* Ranks that disagree on the collective (op, count, type, reduction, root) hang, as NCCL's
     * kernels do when the ranks' steps do not match: nobody ever sends what the others wait for. */
    c->s->sig[me][0] = (uint64_t)o->coll | (uint64_t)o->dt << 8 | (uint64_t)o->red << 16 |
                       (uint64_t)(o->root & 0xffff) << 32;
    c->s->sig[me][1] = n;
    if (sim_barrier(c))
        return ncclInternalError; /* aborted while waiting for the others */
    for (int r = 0; r < R; r++)
        if (c->s->sig[r][0] != c->s->sig[0][0] || c->s->sig[r][1] != c->s->sig[0][1]) {
            unsigned spins = 0;
            while (!atomic_load(&c->aborted))
                pause_briefly(&spins);
            return ncclInternalError;
        }
    uint64_t start = atomic_load(&c->s->release_ns);
    ncclResult_t rc = ncclSuccess;
    /* What the ring sends across nodes goes over the network: this rank's share of the bus bytes
     * (one channel of the ring's) to the next node, and the same from the previous one. */
    int nch = c->ib.channels > 0 ? c->ib.channels : 1;
    uint64_t share = bus_bytes(o->coll, R, b) / (uint64_t)nch;
    int channel = c->rank % nch; /* its ring: the one leaving through its NIC; it receives on
                                  * the previous rank's */
    /* NCCL's proxy steps for them: open while the data is on the wire -- the share over the
     * sending rank's NIC from the release on (a slow NIC keeps its channel's receiver waiting) --
     * and while the kernel computes. */
    struct sim_nprof_xfer tx = {0}, rx = {0};
    int sending = !o->bootstrap && c->ib.on && c->ib.send_to >= 0;
    int receiving = !o->bootstrap && c->ib.on && c->ib.recv_from >= 0;
    uint64_t end = start + model_ns(c, o->coll, b, 0), t_tx = 0, t_rx = 0;
    if (sending) {
        double r = c->s->nic_Bps[c->rank];
        t_tx = r > 0 ? wire_end(start, share, r, end) : 0;
        atomic_store(&c->s->wire_end_ns[c->rank], t_tx); /* before the post its receiver awaits */
        sim_nprof_proxy_begin(c, o->prof, channel, c->ib.send_to, 1, share, &tx);
        rc = sim_ib_send(c, c->ib.send_to, share);
    }
    if (receiving) {
        sim_nprof_proxy_begin(c, o->prof, c->ib.recv_from % nch, c->ib.recv_from, 0, share, &rx);
        if (rc == ncclSuccess)
            rc = sim_ib_wait(c, c->ib.recv_from);
        /* the sender's, stored before it posted this message (its next waits for the
         * closing barrier) */
        t_rx = rc == ncclSuccess ? atomic_load(&c->s->wire_end_ns[c->ib.recv_from]) : 0;
    }
    char *out = o->rb;
    switch (rc == ncclSuccess ? o->coll : -1) {
    case C_ALLREDUCE:
    case C_REDUCE:
        if (o->coll == C_REDUCE && me != o->root)
            break;
        memcpy(out, slot(c, 0), b);
        for (int r = 1; r < R && rc == ncclSuccess; r++)
            rc = reduce_into(out, slot(c, r), n, o->dt, o->red);
        if (o->red == ncclAvg)
            average(out, n, o->dt, R);
        break;
    case C_BROADCAST: memcpy(out, slot(c, o->root), b); break;
    case C_ALLGATHER:
        for (int r = 0; r < R; r++)
            memcpy(out + (size_t)r * b, slot(c, r), b);
        break;
    case C_REDUCESCATTER:
        memcpy(out, slot(c, 0) + (size_t)me * b, b);
        for (int r = 1; r < R && rc == ncclSuccess; r++)
            rc = reduce_into(out, slot(c, r) + (size_t)me * b, n, o->dt, o->red);
        if (o->red == ncclAvg)
            average(out, n, o->dt, R);
        break;
    case C_ALLTOALL:
        for (int r = 0; r < R; r++)
            memcpy(out + (size_t)r * b, slot(c, r) + (size_t)me * b, b);
        break;
    case C_GATHER:
        for (int r = 0; me == o->root && r < R; r++)
            memcpy(out + (size_t)r * b, slot(c, r), b);
        break;
    case C_SCATTER: memcpy(out, slot(c, o->root) + (size_t)me * b, b); break;
    }
    if (rc == ncclSuccess && !o->bootstrap)
        nvlink_ring(c, bus_bytes(o->coll, R, b));
    /* each step stops when its data is through, the earlier first */
    int rx_first = receiving && (!sending || t_rx <= t_tx);
    if (rx_first) {
        wait_until(t_rx);
        sim_nprof_proxy_end(c, &rx, 0, share);
    }
    if (sending) {
        wait_until(t_tx);
        sim_nprof_proxy_end(c, &tx, 1, share);
    }
    if (receiving && !rx_first) {
        wait_until(t_rx);
        sim_nprof_proxy_end(c, &rx, 0, share);
    }
    wait_until(end);
    sim_nprof_kernel(c, o->prof, o->prof_channels, start, end);
    if (sim_barrier(c)) /* nobody refills a slot before everyone has read it */
        return ncclInternalError;
    return rc;
}

static ncclResult_t run_send(const struct op *o)
{
    ncclComm_t c = o->comm;
    size_t b = o->count * dt_size(o->dt);
    if (b > MBOX || o->root < 0 || o->root >= c->nranks)
        return ncclInvalidArgument;
    __typeof__(c->s->box[0][0]) *x = &c->s->box[c->rank][o->root];
    unsigned spins = 0;
    while (atomic_load(&x->sent) != atomic_load(&x->taken)) /* one message in flight per pair */
        if (atomic_load(&c->aborted))
            return ncclInternalError;
        else
            pause_briefly(&spins);
    memcpy(mbox(c, c->rank, o->root), o->sb, b);
    x->bytes = b;
    atomic_fetch_add(&x->sent, 1);
    if (c->ib.on && c->s->node[o->root] != c->s->node[c->rank]) { /* over the network */
        struct sim_nprof_xfer px; /* NCCL's proxy reports it (no p2p event is modelled) */
        int ch = c->ib.channels > 0 ? c->rank % c->ib.channels : 0;
        sim_nprof_proxy_begin(c, NULL, ch, o->root, 1, b, &px);
        ncclResult_t rc = sim_ib_send(c, o->root, b);
        sim_nprof_proxy_end(c, &px, 1, b);
        return rc;
    }
    topo_once();
    int a = c->dev, d = c->s->dev[o->root];
    if (c->s->node[o->root] == c->s->node[c->rank] && a != d && nvl_counters) /* over NVLink */
        sim_counters_add(nvl_counters, a, d, sim_topo_lanes(&topo, a, d), b);
    return ncclSuccess;
}

static ncclResult_t run_recv(const struct op *o)
{
    ncclComm_t c = o->comm;
    size_t b = o->count * dt_size(o->dt);
    if (o->root < 0 || o->root >= c->nranks)
        return ncclInvalidArgument;
    __typeof__(c->s->box[0][0]) *x = &c->s->box[o->root][c->rank];
    unsigned spins = 0;
    uint64_t start = now_ns();
    while (atomic_load(&x->sent) == atomic_load(&x->taken))
        if (atomic_load(&c->aborted))
            return ncclInternalError;
        else
            pause_briefly(&spins);
    if (x->bytes != b)
        return ncclInvalidUsage;
    int cross = c->s->node[o->root] != c->s->node[c->rank];
    ncclResult_t rc = ncclSuccess;
    if (c->ib.on && cross) {
        struct sim_nprof_xfer px; /* on the sender's channel */
        int ch = c->ib.channels > 0 ? o->root % c->ib.channels : 0;
        sim_nprof_proxy_begin(c, NULL, ch, o->root, 0, b, &px);
        rc = sim_ib_wait(c, o->root);
        sim_nprof_proxy_end(c, &px, 0, b);
    }
    memcpy(o->rb, mbox(c, o->root, c->rank), b);
    atomic_fetch_add(&x->taken, 1);
    wait_until(start + model_ns(c, -1, b, cross));
    return rc;
}

static int reducible(ncclDataType_t t)
{
    return t == ncclInt32 || t == ncclUint32 || t == ncclInt64 || t == ncclUint64 ||
           t == ncclFloat32 || t == ncclFloat64;
}

/* What can be checked before enqueueing is, and returned by the call itself (like NCCL's
 * argument checks). */
static ncclResult_t check(const struct op *o)
{
    ncclComm_t c = o->comm;
    if (!c || !c->s || o->count > SLOT) /* (count * size must not wrap) */
        return ncclInvalidArgument;
    size_t b = o->count * dt_size(o->dt), R = (size_t)c->nranks;
    if (o->kind != 0)
        return o->root < 0 || o->root >= c->nranks || b > MBOX ? ncclInvalidArgument : ncclSuccess;
    int red = o->coll == C_ALLREDUCE || o->coll == C_REDUCE || o->coll == C_REDUCESCATTER;
    size_t in =
        o->coll == C_ALLTOALL || o->coll == C_REDUCESCATTER || o->coll == C_SCATTER ? b * R : b;
    if (in > SLOT || (red && !reducible(o->dt)) || o->root < 0 || o->root >= c->nranks)
        return ncclInvalidArgument;
    return ncclSuccess;
}

static void run_op(const struct op *o)
{
    atomic_fetch_add(&o->comm->running, 1);
    if (!atomic_load(&o->comm->aborted)) { /* else queued before the abort: never runs */
        ncclResult_t r = o->kind == 0 ? run_coll(o) : o->kind == 1 ? run_send(o) : run_recv(o);
        ncclResult_t none = ncclSuccess;
        if (r != ncclSuccess)
            atomic_compare_exchange_strong(&o->comm->async_error, &none, r);
    }
    atomic_fetch_sub(&o->comm->running, 1);
}

/* The stream's worker runs a batch: sends first, then collectives, then receives (so a group's
 * ring exchange cannot deadlock). */
static void run_batch(void *arg)
{
    struct batch *b = arg;
    for (int pass = 0; pass < 3; pass++)
        for (size_t i = 0; i < b->n; i++) {
            const struct op *o = &b->op[i];
            if ((pass == 0 && o->kind == 1) || (pass == 1 && o->kind == 0) ||
                (pass == 2 && o->kind == 2))
                run_op(o);
        }
    for (size_t i = 0; i < b->n; i++)
        atomic_fetch_sub(&b->op[i].comm->inflight, 1);
    free(b);
}

static ncclResult_t enqueue_batch(const struct op *ops, size_t n)
{
    if (n == 0)
        return ncclSuccess;
    /* Into a capturing stream: real NCCL adds its kernels to the graph.  The simulation does not
     * replay graphs, so captured work is accepted and dropped. */
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(ops[0].stream, &cs) == cudaSuccess &&
        cs != cudaStreamCaptureStatusNone)
        return ncclSuccess;
    struct batch *b = malloc(sizeof(*b) + n * sizeof(struct op));
    if (!b)
        return ncclSystemError;
    b->n = n;
    memcpy(b->op, ops, n * sizeof(struct op));
    /* The profiler plugin's collective events, as NCCL starts and stops them at the launch: the
     * algorithm and protocol chosen, numbered per communicator in launch order. */
    for (size_t i = 0; i < n; i++) {
        struct op *o = &b->op[i];
        if (o->kind != 0 || o->bootstrap)
            continue;
        struct sim_nprof_choice ch;
        int local = o->comm->nranks / (o->comm->nodes > 0 ? o->comm->nodes : 1);
        sim_nprof_choose(o->coll, (uint64_t)o->count * dt_size(o->dt), o->comm->nranks, local, &ch);
        o->prof = sim_nprof_coll(o->comm, o->comm->coll_seq++, o->coll, o->sb, o->rb, o->count,
                                 o->dt, o->root, &ch);
        o->prof_channels = ch.channels;
    }
    for (size_t i = 0; i < n; i++)
        atomic_fetch_add(&ops[i].comm->inflight, 1);
    if (cudaLaunchHostFunc(ops[0].stream, run_batch, b) != cudaSuccess) {
        for (size_t i = 0; i < n; i++)
            atomic_fetch_sub(&ops[i].comm->inflight, 1);
        free(b);
        return ncclUnhandledCudaError;
    }
    return ncclSuccess;
}

static ncclResult_t submit(const struct op *o)
{
    ncclResult_t rc = check(o);
    if (rc != ncclSuccess)
        return rc;
    if (group_depth == 0)
        return enqueue_batch(o, 1);
    if (nqueue == capqueue) {
        capqueue = capqueue ? 2 * capqueue : 16;
        struct op *q = realloc(queue, capqueue * sizeof(*q));
        if (!q)
            return ncclSystemError;
        queue = q;
    }
    queue[nqueue++] = *o;
    return ncclSuccess;
}

/* Host-side operations on a communicator (split, destroy) first let its enqueued work finish. */
static void drain(ncclComm_t c)
{
    unsigned spins = 0;
    while (c && atomic_load(&c->inflight) > 0)
        pause_briefly(&spins);
}

/* ---- communicators ---- */

SIM_EXPORT ncclResult_t pncclGetVersion(int *v)
{
    *v = NCCL_VERSION_CODE;
    return ncclSuccess;
}

SIM_EXPORT ncclResult_t pncclGetUniqueId(ncclUniqueId *id)
{
    memset(id, 0, sizeof(*id));
    uint64_t r = now_ns() ^ ((uint64_t)getpid() << 32);
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, &r, sizeof(r)) != (ssize_t)sizeof(r))
            r ^= 0x9e3779b97f4a7c15ull;
        close(fd);
    }
    memcpy(id->internal, &r, sizeof(r));
    return ncclSuccess;
}

/* Like NCCL: at each communicator's creation, its rank NCCL_TOPO_DUMP_FILE_RANK (0 by default)
 * writes the detected topology and its rank NCCL_GRAPH_DUMP_FILE_RANK the ring graph to the files
 * the environment names (overwriting them).  The graph has one channel per local GPU: channel
 * k enters a node through GPU k's NIC, runs through GPUs k, k+1, ... and leaves through the NIC of
 * the GPU before k -- the edges ring_edges() in nccl_ib.c sends over. */
static int env_int(const char *name, int def)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : def;
}

static void write_dumps(ncclComm_t c)
{
    topo_once();
    const char *tp = getenv("NCCL_TOPO_DUMP_FILE"), *gp = getenv("NCCL_GRAPH_DUMP_FILE");
    if (c->rank != env_int("NCCL_TOPO_DUMP_FILE_RANK", 0))
        tp = NULL;
    if (c->rank != env_int("NCCL_GRAPH_DUMP_FILE_RANK", 0))
        gp = NULL;
    FILE *f = tp ? fopen(tp, "w") : NULL;
    if (f) {
        fprintf(f, "<system version=\"1\">\n  <cpu numaid=\"0\" arch=\"x86_64\">\n");
        for (int g = 0; g < topo.ngpus; g++)
            fprintf(f,
                    "    <pci busid=\"%s\" class=\"0x030200\"><gpu dev=\"%d\" sm=\"90\" "
                    "rank=\"%d\"><nvlink target=\"nvswitch\" count=\"%d\"/></gpu></pci>\n",
                    topo.gpu[g].bus, g, g, topo.nvswitch_links);
        for (int n = 0; n < topo.nnics; n++)
            fprintf(f, "    <nic><net name=\"%s\" dev=\"%d\" speed=\"%.0f\"/></nic>\n",
                    topo.nic[n].name, n, topo.nic[n].rate_gbps * 1000);
        fprintf(f, "  </cpu>\n</system>\n");
        fclose(f);
    }
    f = gp ? fopen(gp, "w") : NULL;
    /* the communicator's own GPUs on this node, in rank order (a split of GPUs 4-7 names 4-7) */
    int dv[MAXR], lws = 0;
    for (int r = 0; r < c->nranks && lws < MAXR; r++)
        if (c->s->node[r] == c->s->node[c->rank])
            dv[lws++] = c->s->dev[r];
    if (f && lws > 0) {
        fprintf(f,
                "<graphs version=\"1\">\n  <graph id=\"0\" pattern=\"4\" crossnic=\"0\" "
                "nchannels=\"%d\" speedintra=\"%g\" speedinter=\"%g\">\n",
                lws, topo.nvswitch_links * topo.nvlink_gbps,
                topo.nnics ? topo.nic[0].rate_gbps / 8 : 0);
        int nn = topo.nnics ? topo.nnics : 1;
        for (int k = 0; k < lws; k++) { /* a GPU's NIC: its device index modulo the NICs */
            fprintf(f, "    <channel>");
            if (c->nodes > 1)
                fprintf(f, "<net dev=\"%d\"/>", dv[k] % nn);
            for (int i = 0; i < lws; i++)
                fprintf(f, "<gpu dev=\"%d\"/>", dv[(k + i) % lws]);
            if (c->nodes > 1)
                fprintf(f, "<net dev=\"%d\"/>", dv[(k + lws - 1) % lws] % nn);
            fprintf(f, "</channel>\n");
        }
        fprintf(f, "  </graph>\n</graphs>\n");
        fclose(f);
    }
}

/* NCCL_DEBUG=INFO: like NCCL, one line per channel for this rank's connection to the next rank
 * of the ring ("via P2P/..." inside a node, "[send] via NET/IB/<nic>" out of it, "[receive]" for
 * the connection into it), to $NCCL_DEBUG_FILE (%h host, %p pid expanded) or stdout. */
static void debug_lines(ncclComm_t c)
{
    const char *lvl = getenv("NCCL_DEBUG");
    if (!lvl || (strcasecmp(lvl, "INFO") && strcasecmp(lvl, "TRACE")))
        return;
    char host[64] = "?", path[512] = "";
    gethostname(host, sizeof(host) - 1);
    const char *f = getenv("NCCL_DEBUG_FILE");
    for (size_t i = 0, o = 0; f && f[i] && o + 64 < sizeof(path); i++) {
        if (f[i] == '%' && f[i + 1] == 'h')
            o += (size_t)snprintf(path + o, sizeof(path) - o, "%s", host), i++;
        else if (f[i] == '%' && f[i + 1] == 'p')
            o += (size_t)snprintf(path + o, sizeof(path) - o, "%d", (int)getpid()), i++;
        else
            path[o++] = f[i], path[o] = 0;
    }
    FILE *out = path[0] ? fopen(path, "a") : stdout;
    if (!out)
        return;
    int R = c->nranks, me = c->rank, nl = 0, li = 0, nic = c->dev < 0 ? 0 : c->dev;
    for (int r = 0; r < R; r++)
        if (c->s->node[r] == c->s->node[me]) {
            li += r < me;
            nl++;
        }
    if (topo.nnics)
        nic %= topo.nnics;
    const char *who = "%s:%d:%d [%d] NCCL INFO Channel %02d/0 : %d[%d] -> %d[%d] ";
    for (int ch = 0; ch < nl; ch++) {
        int pos = (li - ch + nl) % nl; /* where this rank is in the channel's order on its node */
        if (pos + 1 < nl || c->nodes == 1) {
            int to = me + ((li + 1) % nl -
                           li); /* the next local rank (ranks of a node are contiguous) */
            fprintf(out, who, host, (int)getpid(), (int)getpid(), c->dev, ch, me, c->dev, to,
                    (c->dev + 1) % nl);
            fprintf(out, "via P2P/CUMEM\n");
        } else if (c->ib.on && c->ib.send_to >= 0) {
            fprintf(out, who, host, (int)getpid(), (int)getpid(), c->dev, ch, me, c->dev,
                    c->ib.send_to, (c->dev + 1) % nl);
            fprintf(out, "[send] via NET/IB/%d\n", nic);
        }
        if (pos == 0 && c->nodes > 1 && c->ib.on && c->ib.recv_from >= 0) {
            fprintf(out, who, host, (int)getpid(), (int)getpid(), c->dev, ch, c->ib.recv_from,
                    (c->dev + nl - 1) % nl, me, c->dev);
            fprintf(out, "[receive] via NET/IB/%d\n", nic);
        }
    }
    fprintf(out, "%s:%d:%d [%d] NCCL INFO Connected all rings, use ring PXN 0 GDR 0\n", host,
            (int)getpid(), (int)getpid(), c->dev);
    if (out != stdout)
        fclose(out);
    else
        fflush(out);
}

/* Join communicator `id` as `rank` of `nranks` on CUDA device `dev`, into the caller's c. */
static ncclResult_t comm_join(struct ncclComm *c, int nranks, uint64_t id, int rank, int dev)
{
    c->rank = rank;
    c->nranks = nranks;
    c->id = id;
    c->dev = dev;
    snprintf(c->name, sizeof(c->name), "/icxsim-nccl-%016llx-%d", (unsigned long long)id, nranks);
    c->map_bytes = HDR + (size_t)(nranks + 1) * SLOT + (size_t)nranks * nranks * MBOX;
    int fd = shm_open(c->name, O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)c->map_bytes) != 0) {
        if (fd >= 0)
            close(fd);
        return ncclSystemError;
    }
    void *m = mmap(NULL, c->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return ncclSystemError;
    c->s = m;
    const char *node = getenv("ICXSIM_NODE");
    c->s->node[rank] = node ? atoi(node) : 0;
    c->s->dev[rank] = c->dev;
    c->s->nranks = nranks;
    atomic_fetch_add(&c->s->joined, 1);
    unsigned spins = 0;
    while (atomic_load(&c->s->joined) < (uint32_t)nranks) /* the bootstrap: everyone is here */
        pause_briefly(&spins);
    c->nodes = 1;
    for (int r = 1; r < nranks; r++)
        c->nodes += c->s->node[r] != c->s->node[r - 1];
    sim_ib_setup(c);
    c->s->nic_Bps[rank] = my_nic_rate(c);
    write_dumps(c);
    debug_lines(c);
    sim_nprof_comm_init(c);
    return ncclSuccess;
}

static ncclResult_t comm_open(ncclComm_t *out, int nranks, uint64_t id, int rank)
{
    if (nranks < 1 || nranks > MAXR || rank < 0 || rank >= nranks)
        return ncclInvalidArgument;
    struct ncclComm *c = calloc(1, sizeof(*c));
    if (!c)
        return ncclSystemError;
    int dev = 0;
    cudaGetDevice(&dev);
    ncclResult_t rc = comm_join(c, nranks, id, rank, dev);
    if (rc != ncclSuccess) {
        free(c);
        return rc;
    }
    *out = c;
    return ncclSuccess;
}

/* A non-blocking creation (config->blocking == 0): the handle at once, ncclInProgress, and the
 * joining in a thread of the library's; ncclCommGetAsyncError says ncclInProgress until it is
 * done, as with NCCL. */
struct join_args {
    struct ncclComm *c;
    int nranks, rank, dev;
    uint64_t id;
};

static void *join_thread(void *arg)
{
    struct join_args *a = arg;
    ncclResult_t rc = comm_join(a->c, a->nranks, a->id, a->rank, a->dev);
    atomic_store(&a->c->async_error, rc);
    free(a);
    return NULL;
}

SIM_EXPORT ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    uint64_t key;
    memcpy(&key, id.internal, sizeof(key));
    return comm_open(comm, nranks, key, rank);
}

SIM_EXPORT ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id,
                                                int rank, ncclConfig_t *config)
{
    if (!config || config->blocking != 0)
        return pncclCommInitRank(comm, nranks, id, rank);
    if (!comm || nranks < 1 || nranks > MAXR || rank < 0 || rank >= nranks)
        return ncclInvalidArgument;
    struct ncclComm *c = calloc(1, sizeof(*c));
    struct join_args *a = malloc(sizeof(*a));
    if (!c || !a) {
        free(c);
        free(a);
        return ncclSystemError;
    }
    uint64_t key;
    memcpy(&key, id.internal, sizeof(key));
    *a = (struct join_args){c, nranks, rank, 0, key};
    cudaGetDevice(&a->dev); /* the caller's device, as NCCL takes it */
    atomic_store(&c->async_error, ncclInProgress);
    pthread_t t;
    if (pthread_create(&t, NULL, join_thread, a) != 0) {
        free(c);
        free(a);
        return ncclSystemError;
    }
    pthread_detach(t);
    *comm = c;
    return ncclInProgress;
}

SIM_EXPORT ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                       ncclConfig_t *config)
{
    (void)config;
    if (!comm || !comm->s)
        return ncclInvalidArgument;
    drain(comm);
    /* Everyone publishes (color, key) through the collective slots, then picks its group. */
    int mine[2] = {color, key};
    struct op o = {0, C_ALLGATHER, mine, NULL, 2, ncclInt32, ncclSum, 0, comm, NULL, 1, NULL, 0};
    int *all = calloc((size_t)comm->nranks, sizeof(mine));
    if (!all)
        return ncclSystemError;
    o.rb = all;
    ncclResult_t rc = run_coll(&o);
    int n = 0, rank = 0;
    for (int r = 0; rc == ncclSuccess && r < comm->nranks; r++)
        if (all[2 * r] == color) {
            if (all[2 * r + 1] < key || (all[2 * r + 1] == key && r < comm->rank))
                rank++;
            n++;
        }
    free(all);
    if (rc != ncclSuccess)
        return rc;
    /* Every rank counts every split of the parent, NOCOLOR ones too, so the next split's ids
     * agree on all of them (a per-thread count that skipped NOCOLOR ranks hung the next split). */
    unsigned splits = ++comm->splits;
    if (color == NCCL_SPLIT_NOCOLOR) {
        *newcomm = NULL;
        return ncclSuccess;
    }
    uint64_t id = comm->id * 0x9e3779b97f4a7c15ull + (uint64_t)(color + 1) * 1000003u + splits;
    return comm_open(newcomm, n, id, rank);
}

static void comm_close(ncclComm_t c)
{
    if (!c)
        return;
    drain(c);
    sim_nprof_comm_fini(c);
    sim_ib_teardown(c);
    munmap(c->s, c->map_bytes);
    shm_unlink(c->name); /* the last reference keeps it for the others */
    free(c);
}

SIM_EXPORT ncclResult_t pncclCommFinalize(ncclComm_t c)
{
    (void)c;
    return ncclSuccess;
}
SIM_EXPORT ncclResult_t pncclCommDestroy(ncclComm_t c)
{
    comm_close(c);
    return ncclSuccess;
}
/* Like NCCL's: from any thread, while this rank's work on it waits for peers that will never
 * come -- that work gives up, work queued behind it is dropped, and the call returns.  The
 * handle's memory is kept (a job's other threads and queued work may still hold it, as with
 * NCCL's watchdogs); calls on it afterwards are refused with ncclInvalidArgument. */
SIM_EXPORT ncclResult_t pncclCommAbort(ncclComm_t c)
{
    if (!c)
        return ncclSuccess;
    if (!c->s)
        return ncclInvalidArgument;
    atomic_store(&c->aborted, 1);
    unsigned spins = 0;
    while (atomic_load(&c->running) > 0) /* not drain(): work queued behind another */
        pause_briefly(&spins);           /* communicator's on its stream may never start */
    sim_nprof_comm_fini(c);
    sim_ib_teardown(c);
    munmap(c->s, c->map_bytes);
    shm_unlink(c->name);
    c->s = NULL;
    return ncclSuccess;
}
SIM_EXPORT ncclResult_t pncclCommGetAsyncError(ncclComm_t c, ncclResult_t *e)
{
    if (!c || !e)
        return ncclInvalidArgument;
    *e = atomic_load(&c->async_error);
    return ncclSuccess;
}
SIM_EXPORT ncclResult_t pncclCommCount(const ncclComm_t c, int *n)
{
    *n = c->nranks;
    return ncclSuccess;
}
SIM_EXPORT ncclResult_t pncclCommCuDevice(const ncclComm_t c, int *d)
{
    *d = c->dev;
    return ncclSuccess;
}
SIM_EXPORT ncclResult_t pncclCommUserRank(const ncclComm_t c, int *r)
{
    *r = c->rank;
    return ncclSuccess;
}
SIM_EXPORT const char *pncclGetErrorString(ncclResult_t r)
{
    return r == ncclSuccess ? "no error" : "simulated NCCL error";
}

/* ---- collectives and point-to-point ---- */

SIM_EXPORT ncclResult_t pncclAllReduce(const void *sb, void *rb, size_t count, ncclDataType_t dt,
                                       ncclRedOp_t op, ncclComm_t comm, cudaStream_t s)
{
    struct op o = {0, C_ALLREDUCE, sb, rb, count, dt, op, 0, comm, s, 0, NULL, 0};
    return submit(&o);
}
SIM_EXPORT ncclResult_t pncclBroadcast(const void *sb, void *rb, size_t count, ncclDataType_t dt,
                                       int root, ncclComm_t comm, cudaStream_t s)
{
    struct op o = {0, C_BROADCAST, sb, rb, count, dt, ncclSum, root, comm, s, 0, NULL, 0};
    return submit(&o);
}
/* In place, through the public entry point, as real NCCL does. */
SIM_EXPORT ncclResult_t pncclBcast(void *buff, size_t count, ncclDataType_t dt, int root,
                                   ncclComm_t comm, cudaStream_t s)
{
    return ncclBroadcast(buff, buff, count, dt, root, comm, s);
}
SIM_EXPORT ncclResult_t pncclReduce(const void *sb, void *rb, size_t count, ncclDataType_t dt,
                                    ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t s)
{
    struct op o = {0, C_REDUCE, sb, rb, count, dt, op, root, comm, s, 0, NULL, 0};
    return submit(&o);
}
SIM_EXPORT ncclResult_t pncclAllGather(const void *sb, void *rb, size_t count, ncclDataType_t dt,
                                       ncclComm_t comm, cudaStream_t s)
{
    struct op o = {0, C_ALLGATHER, sb, rb, count, dt, ncclSum, 0, comm, s, 0, NULL, 0};
    return submit(&o);
}
SIM_EXPORT ncclResult_t pncclReduceScatter(const void *sb, void *rb, size_t count,
                                           ncclDataType_t dt, ncclRedOp_t op, ncclComm_t comm,
                                           cudaStream_t s)
{
    struct op o = {0, C_REDUCESCATTER, sb, rb, count, dt, op, 0, comm, s, 0, NULL, 0};
    return submit(&o);
}
SIM_EXPORT ncclResult_t pncclAlltoAll(const void *sb, void *rb, size_t count, ncclDataType_t dt,
                                      ncclComm_t comm, cudaStream_t s)
{
    struct op o = {0, C_ALLTOALL, sb, rb, count, dt, ncclSum, 0, comm, s, 0, NULL, 0};
    return submit(&o);
}
SIM_EXPORT ncclResult_t pncclGather(const void *sb, void *rb, size_t count, ncclDataType_t dt,
                                    int root, ncclComm_t comm, cudaStream_t s)
{
    struct op o = {0, C_GATHER, sb, rb, count, dt, ncclSum, root, comm, s, 0, NULL, 0};
    return submit(&o);
}
SIM_EXPORT ncclResult_t pncclScatter(const void *sb, void *rb, size_t count, ncclDataType_t dt,
                                     int root, ncclComm_t comm, cudaStream_t s)
{
    struct op o = {0, C_SCATTER, sb, rb, count, dt, ncclSum, root, comm, s, 0, NULL, 0};
    return submit(&o);
}
SIM_EXPORT ncclResult_t pncclSend(const void *sb, size_t count, ncclDataType_t dt, int peer,
                                  ncclComm_t comm, cudaStream_t s)
{
    struct op o = {1, 0, sb, NULL, count, dt, ncclSum, peer, comm, s, 0, NULL, 0};
    return submit(&o);
}
SIM_EXPORT ncclResult_t pncclRecv(void *rb, size_t count, ncclDataType_t dt, int peer,
                                  ncclComm_t comm, cudaStream_t s)
{
    struct op o = {2, 0, NULL, rb, count, dt, ncclSum, peer, comm, s, 0, NULL, 0};
    return submit(&o);
}

/* nccl.h declares these without a prototype ("()"). */
ncclResult_t pncclGroupStart(void);
ncclResult_t pncclGroupEnd(void);

SIM_EXPORT ncclResult_t pncclGroupStart(void)
{
    group_depth++;
    return ncclSuccess;
}

SIM_EXPORT ncclResult_t pncclGroupEnd(void)
{
    if (group_depth == 0)
        return ncclInvalidUsage;
    if (--group_depth)
        return ncclSuccess;
    ncclResult_t rc = enqueue_batch(queue, nqueue);
    nqueue = 0;
    return rc;
}

/* The public names, weak aliases of the pnccl* definitions like the real library's. */
#define A(name) extern __typeof__(p##name) name NCCL_ALIAS(name) SIM_EXPORT;
/* clang-format off */
A(ncclGetVersion)
A(ncclGetUniqueId)
A(ncclCommInitRank)
A(ncclCommInitRankConfig)
A(ncclCommSplit)
A(ncclCommFinalize)
A(ncclCommDestroy)
A(ncclCommAbort)
A(ncclCommGetAsyncError)
A(ncclCommCount)
A(ncclCommCuDevice)
A(ncclCommUserRank)
A(ncclGetErrorString)
A(ncclAllReduce)
A(ncclBroadcast)
A(ncclBcast)
A(ncclReduce)
A(ncclAllGather)
A(ncclReduceScatter)
A(ncclAlltoAll)
A(ncclGather)
A(ncclScatter)
A(ncclSend)
A(ncclRecv)
A(ncclGroupStart)
A(ncclGroupEnd)
/* clang-format on */
#undef A
