/* NCCL report: per communicator and operation, calls, bytes, time and bus bandwidth; stragglers.
 *
 * A communicator is known on every rank by the same comm_id; a collective instance by (comm_id,
 * seq), a send/recv pair by (comm_id, sender, receiver, seq).  Times are put on one wall-clock
 * timeline (each process's CLOCK anchor).  An instance's duration runs from the last rank's
 * start on the GPU to the last rank's GPU finish (calls without GPU timing: host arrival to
 * return): the time the operation itself took, which is what bus bandwidth is about (nccl-tests' conventions: size = this rank's buffer, times the number of
 * ranks for gathers and scatters; busbw = algbw x 2(n-1)/n for all-reduce, (n-1)/n for all-gather,
 * reduce-scatter, all-to-all, gather, scatter, 1 otherwise).  A call in a group returns with its
 * group's ncclGroupEnd.
 *
 * Stragglers: all-reduce equalizes durations, so arrivals are compared, not durations.  Per
 * instance the skew is last arrival - first.  A rank is named when the instances it arrived last
 * at hold at least half of a communicator's total skew (it is why the others waited), it was last
 * at 3 or more of them and at a quarter of all (a straggler is persistent; a loaded host makes
 * any rank late now and then), and their median skew is at least 5 ms, 4 times the median skew of the
 * instances where someone else was last, and a quarter of the communicator's median instance
 * time (a wait that small next to the collective itself is not worth a finding) (below that it is the usual jitter of arrivals, which on
 * an oversubscribed host always has a loser).
 *
 * Hangs and post-mortems: every call is written on entry too, so a call that never returned is in
 * the trace, and work NCCL enqueued whose GPU span had started but not finished when the trace
 * ended is marked so (without that final frame -- SIGKILL -- GPU work issued over a second before
 * the trace's end and never reported finished counts as unfinished).  For each communicator, the
 * ranks still inside a collective (host or GPU) when their traces end wait in that collective
 * instance; the ranks of the communicator that never issued it are the ones they wait for, named
 * with their last recorded NCCL call and how their trace ended.  A collective every waiter issued
 * on a stream behind another communicator's stuck call is only queued behind it: no finding. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_graph.h"
#include "report.h"

#define NOPS 12
static const char *const op_names[NOPS] = {"AllReduce", "Broadcast",     "Reduce",   "AllGather",
                                           "ReduceScatter", "AlltoAll",  "Gather",   "Scatter",
                                           "Send",      "Recv",          "GroupEnd", "?"};

static int op_of(unsigned api)
{
    switch (api) {
    case ICX_API_ncclAllReduce: return 0;
    case ICX_API_ncclBroadcast: case ICX_API_ncclBcast: return 1;
    case ICX_API_ncclReduce: return 2;
    case ICX_API_ncclAllGather: return 3;
    case ICX_API_ncclReduceScatter: return 4;
    case ICX_API_ncclAlltoAll: return 5;
    case ICX_API_ncclGather: return 6;
    case ICX_API_ncclScatter: return 7;
    case ICX_API_ncclSend: return 8;
    case ICX_API_ncclRecv: return 9;
    case ICX_API_ncclGroupEnd: return 10;
    default: return 11;
    }
}

static double bus_factor(int op, double n)
{
    return op == 0 ? 2 * (n - 1) / n : (op >= 3 && op <= 7) ? (n - 1) / n : 1;
}
static double size_mult(int op, double n)
{
    return op >= 3 && op <= 7 ? n : 1;
}

/* One call put on the shared timeline, with what it belongs to. */
struct call {
    uint64_t comm_id, seq, bytes;
    int op, rank, peer, nranks;
    double enter, exit;
    int gpu;                   /* enum icx_gpu_state */
    double gpu_start, gpu_end; /* on the timeline, when ICX_GPU_DONE */
    const struct icx_proc *p;
    double mono; /* host enter on the process's own monotonic clock */
};

struct opstat {
    uint64_t calls, bytes, min_calls, max_calls;
    double *dur, *gpu, *host; /* instance times; GPU span of every GPU-timed call; host call */
    size_t ndur, ngpu, nhost;
    int host_timed; /* instances timed by host enter/exit (untimed on the GPU) */
    uint64_t hist[66]; /* calls by size: [0] 0 bytes, [k] 2^(k-2) < bytes <= 2^(k-1) */
    double busbw, algbw, p50, p99, gpu_p50, gpu_p99, host_p50;
};

struct rankstat {
    int rank;
    uint64_t last;
    double imposed, *skews; /* skews of the instances it was last in */
    size_t nskews;
};

struct stuck {
    int op, nwaiting, nmissing;
    int ongpu, unknown; /* of the waiting: inside NCCL's GPU work; GPU work not known finished */
    int behind;         /* of the waiting: queued on their stream behind another stuck call */
    uint64_t seq;
    double since; /* wall s of the first waiter's entry */
    int *waiting, *missing;
};

struct comm {
    uint64_t id;
    struct stuck stuck; /* nwaiting 0: none */
    int nranks, traced;
    struct opstat op[NOPS];
    uint64_t instances;
    double total_skew;
    double *skews; /* every instance's, with the last rank: for "someone else was last" */
    int *lasts;
    size_t nskews;
    struct rankstat *ranks; /* by rank */
    struct {
        unsigned api;
        uint64_t calls;
    } other[16]; /* calls on it that are not collectives or send/recv (queries, registration) */
    int nother;
    int nonblocking; /* some rank created it non-blocking (ncclInProgress) */
};

struct clockfix {
    const struct icx_proc *p;
    double offset, residual; /* s: subtracted from its times; median |error| left */
    size_t samples;
};

struct edge {
    const char *src_host, *dst_host;
    int src_gpu, dst_gpu;
    const char *src_nic, *dst_nic; /* NICs of a network edge, from NCCL's graph (NULL: unknown) */
    const char *source;            /* "graph", "ring model" or "p2p" */
    double bytes;
};

struct nvl {
    const struct icx_proc *sp, *dp; /* sender's and receiver's processes (same host) */
    int src, dst;                   /* their CUDA devices */
    double bytes, t;                /* t: the sender's host enter, its monotonic clock */
};

struct icx_nccl {
    struct comm *v;
    size_t n;
    struct clockfix *clk;
    size_t nclk;
    const struct icx_trace *t;
    struct edge *edges; /* per-link bytes, from NCCL's graph or the ring model */
    size_t nedges;
    int comms_graph, comms_ring; /* communicators attributed each way */
    char (**names)[64];          /* NIC name tables the edges point into */
    size_t nnames;
    struct nvl *nvl; /* bytes NCCL's routing put between two GPUs of one host, when */
    size_t nnvl;
    struct nicsum {
        const char *host, *nic;
        double tx, rx;
    } *nics; /* per NIC the graph names, in order of first mention */
    size_t nnics;
};

static int dcmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int call_cmp(const void *a, const void *b)
{
    const struct call *x = a, *y = b;
    if (x->comm_id != y->comm_id)
        return x->comm_id < y->comm_id ? -1 : 1;
    int kx = x->op >= 8, ky = y->op >= 8; /* collectives, then p2p */
    if (kx != ky)
        return kx - ky;
    if (kx) { /* pair a send with its recv: (sender, receiver, seq) */
        int sx = x->op == 8 ? x->rank : x->peer, sy = y->op == 8 ? y->rank : y->peer;
        int rx = x->op == 8 ? x->peer : x->rank, ry = y->op == 8 ? y->peer : y->rank;
        if (sx != sy)
            return sx - sy;
        if (rx != ry)
            return rx - ry;
    }
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return x->rank - y->rank;
}

static struct comm *comm_get(struct icx_nccl *N, uint64_t id, int nranks)
{
    for (size_t i = 0; i < N->n; i++)
        if (N->v[i].id == id)
            return &N->v[i];
    struct comm *v = realloc(N->v, (N->n + 1) * sizeof(*v));
    if (!v)
        return NULL;
    N->v = v;
    struct comm *c = &N->v[N->n++];
    memset(c, 0, sizeof(*c));
    c->id = id;
    c->nranks = nranks;
    c->ranks = calloc(nranks > 0 ? (size_t)nranks : 1, sizeof(*c->ranks));
    for (int r = 0; c->ranks && r < nranks; r++)
        c->ranks[r].rank = r;
    return c;
}

static void push(double **v, size_t *n, double x)
{
    double *nv = realloc(*v, (*n + 1) * sizeof(double));
    if (nv) {
        *v = nv;
        nv[(*n)++] = x;
    }
}

/* The communicator a call of process p used: the latest creation of that handle before it. */
static const struct icx_rd_ncomm *comm_of(const struct icx_proc *p, uint64_t h, double t)
{
    const struct icx_rd_ncomm *best = NULL;
    for (size_t i = 0; i < p->nncomms; i++) {
        const struct icx_rd_ncomm *c = &p->ncomms[i];
        if (c->comm == h && c->t <= t && c->nranks > 0 && (c->result == 0 || c->result == 7) &&
            (c->api == ICX_API_ncclCommInitRank || c->api == ICX_API_ncclCommInitRankConfig ||
             c->api == ICX_API_ncclCommSplit || c->api == ICX_API_ncclCommInitRankScalable ||
             c->api == ICX_API_ncclCommShrink))
            best = c;
    }
    return best;
}

static double wall_offset(const struct icx_proc *p)
{
    return p->nclocks ? ((double)p->clocks[0].real_ns - (double)p->clocks[0].mono_ns) / 1e9 : 0;
}

/* Calls of every process on one timeline; a call in a group ends with its group. */
static struct call *collect(const struct icx_trace *t, size_t *ncalls)
{
    size_t n = 0, cap = 0;
    struct call *v = NULL;
    for (size_t i = 0; i < t->nprocs; i++) {
        const struct icx_proc *p = t->procs[i];
        double off = wall_offset(p);
        for (size_t k = 0; k < p->nncalls; k++) {
            const struct icx_rd_ncall *c = &p->ncalls[k];
            int op = op_of(c->api);
            if (op >= 10 || c->result != 0 || c->pending)
                continue;
            const struct icx_rd_ncomm *cm = comm_of(p, c->comm, c->t_enter);
            if (!cm)
                continue;
            double exit = c->t_exit;
            for (size_t g = k + 1; c->group && g < p->nncalls; g++)
                if (p->ncalls[g].api == ICX_API_ncclGroupEnd && p->ncalls[g].group == c->group &&
                    p->ncalls[g].tid == c->tid && !p->ncalls[g].pending) {
                    exit = p->ncalls[g].t_exit;
                    break;
                }
            if (n == cap) {
                cap = cap ? 2 * cap : 256;
                struct call *nv = realloc(v, cap * sizeof(*v));
                if (!nv)
                    break;
                v = nv;
            }
            v[n++] = (struct call){cm->comm_id, c->seq,      c->bytes,           op,
                                   cm->rank,    c->peer,     cm->nranks,         c->t_enter + off,
                                   exit + off,  c->gpu,      c->gpu_start + off, c->gpu_end + off,
                                   p,           c->t_enter};
        }
    }
    *ncalls = n;
    return v;
}

/* The end of the instance starting at v[i]: calls equal in everything but the rank (call_cmp
 * orders by rank last). */
static size_t instance_end(const struct call *v, size_t n, size_t i)
{
    size_t j = i + 1;
    while (j < n && v[j].comm_id == v[i].comm_id && v[j].seq == v[i].seq &&
           (v[j].op >= 8) == (v[i].op >= 8) &&
           (v[i].op < 8 || ((v[j].op == 8 ? v[j].rank : v[j].peer) ==
                                (v[i].op == 8 ? v[i].rank : v[i].peer) &&
                            (v[j].op == 8 ? v[j].peer : v[j].rank) ==
                                (v[i].op == 8 ? v[i].peer : v[i].rank))))
        j++;
    return j;
}

/* How the instance v[i..j) can be timed: 2 every call's GPU span finished, 1 none GPU-timed
 * (host enter/exit), 0 mixed or unfinished. */
static int instance_timing(const struct call *v, size_t i, size_t j)
{
    int done = 0, untimed = 0;
    for (size_t k = i; k < j; k++) {
        done += v[k].gpu == ICX_GPU_DONE;
        untimed += v[k].gpu == ICX_GPU_UNTIMED;
    }
    return done == (int)(j - i) ? 2 : untimed == (int)(j - i) ? 1 : 0;
}

/* Size class of a call: 0 for 0 bytes, k for 2^(k-2) < bytes <= 2^(k-1) (the last class open). */
static int size_class(uint64_t b)
{
    int k = 1;
    if (!b)
        return 0;
    while (k < 64 && b > (1ull << (k - 1)))
        k++;
    return k;
}

static double pct(const double *sorted, size_t n, double q)
{
    return n ? sorted[(size_t)(q * (double)(n - 1) + 0.5)] : NAN;
}

/* Cross-host clock alignment.  The ranks of a collective finish it within microseconds of each
 * other (all-reduce, all-gather, reduce-scatter, all-to-all: nobody finishes before the last one
 * arrives and the data has gone round), so each process's offset is the median, over the
 * instances it took part in, of its finish time minus the instance's median finish time; its
 * times are then corrected by that offset, and what remains is the residual.  The finish is the
 * GPU end where every rank's call was GPU-timed (NCCL returns once the work is enqueued), else the
 * host return (only meaningful where the calls block). */
struct member {
    size_t inst, q;
    double exit;
};

static void align_clocks(const struct icx_trace *t, struct icx_nccl *N, struct call *v, size_t n)
{
    size_t np = t->nprocs ? t->nprocs : 1;
    N->clk = calloc(np, sizeof(*N->clk));
    struct member *m = malloc(sizeof(*m) * (n ? n : 1));
    size_t nm = 0, ninst = 0;
    if (!N->clk || !m) {
        free(m);
        return;
    }
    N->nclk = t->nprocs;
    for (size_t q = 0; q < t->nprocs; q++)
        N->clk[q].p = t->procs[q];
    for (size_t i = 0; i < n;) {
        size_t j = instance_end(v, n, i);
        int symmetric = v[i].op == 0 || v[i].op == 3 || v[i].op == 4 || v[i].op == 5;
        int timing = instance_timing(v, i, j);
        if (symmetric && timing && j - i == (size_t)v[i].nranks && j - i > 1) {
            for (size_t k = i; k < j; k++)
                for (size_t q = 0; q < t->nprocs; q++)
                    if (t->procs[q] == v[k].p)
                        m[nm++] = (struct member){ninst, q,
                                                  timing == 2 ? v[k].gpu_end : v[k].exit};
            ninst++;
        }
        i = j;
    }
    /* Alternate: instance times from corrected returns, offsets from those times.  Instances of a
     * communicator inside one host agree with any shift of that host, so they must not pull the
     * estimate towards zero: the alternation settles where every instance is consistent. */
    double *T = calloc(ninst ? ninst : 1, sizeof(double)), *buf = malloc(sizeof(double) * (nm + 1));
    for (int it = 0; T && buf && it < 8; it++) {
        for (size_t a = 0, b; a < nm; a = b) {
            size_t k = 0;
            for (b = a; b < nm && m[b].inst == m[a].inst; b++)
                buf[k++] = m[b].exit - N->clk[m[b].q].offset;
            qsort(buf, k, sizeof(double), dcmp);
            T[m[a].inst] = pct(buf, k, 0.5);
        }
        for (size_t q = 0; q < t->nprocs; q++) {
            size_t k = 0;
            for (size_t x = 0; x < nm; x++)
                if (m[x].q == q)
                    buf[k++] = m[x].exit - T[m[x].inst];
            if (!k)
                continue;
            qsort(buf, k, sizeof(double), dcmp);
            N->clk[q].offset = pct(buf, k, 0.5);
            N->clk[q].samples = k;
        }
    }
    for (size_t q = 0; T && buf && q < t->nprocs; q++) {
        size_t k = 0;
        for (size_t x = 0; x < nm; x++)
            if (m[x].q == q)
                buf[k++] = fabs(m[x].exit - N->clk[q].offset - T[m[x].inst]);
        qsort(buf, k, sizeof(double), dcmp);
        N->clk[q].residual = k ? pct(buf, k, 0.5) : NAN;
    }
    for (size_t k = 0; k < n; k++)
        for (size_t q = 0; q < N->nclk; q++)
            if (N->clk[q].p == v[k].p) {
                v[k].enter -= N->clk[q].offset;
                v[k].exit -= N->clk[q].offset;
                v[k].gpu_start -= N->clk[q].offset;
                v[k].gpu_end -= N->clk[q].offset;
            }
    free(T);
    free(buf);
    free(m);
}

/* Per-link traffic.  Each collective's bus bytes (nccl-tests' factor times the op's size: what
 * every rank of a ring sends to the next) are put on the edges NCCL chose: from its ring graph
 * when every host of the communicator dumped one that covers exactly the communicator's GPUs
 * there (each channel carries 1/nchannels: inside a host GPU to GPU in the channel's order; the
 * last GPU of a host to the first of the next host's channel, leaving and entering through the
 * NICs the graph names); otherwise by the ring model -- the ranks in order, each sending to the
 * next.  Send/recv go to their peer (which NIC is not in the graph).  Links join (host, CUDA
 * device) pairs: inside a host P2P/NVLink, across hosts the network.  NCCL dumps the graph of its
 * first communicator only; it is applied to every communicator whose GPUs it covers. */
static int comm_gpu(const struct icx_proc *p, uint64_t comm_id)
{
    for (size_t k = 0; k < p->nncomms; k++) /* the creation, not the destroy */
        if (p->ncomms[k].comm_id == comm_id && p->ncomms[k].device >= 0)
            return p->ncomms[k].device;
    return -1;
}

static void edge_add(struct icx_nccl *N, const struct call *a, const struct call *b,
                     const char *snic, const char *dnic, const char *source, double bytes)
{
    const char *sh = a->p->host ? a->p->host : "?", *dh = b->p->host ? b->p->host : "?";
    int sg = comm_gpu(a->p, a->comm_id), dg = comm_gpu(b->p, b->comm_id);
    if (!strcmp(sh, dh) && sg >= 0 && dg >= 0 && sg != dg) { /* over NVLink: when, for the counters */
        struct nvl *nv = realloc(N->nvl, (N->nnvl + 1) * sizeof(*nv));
        if (nv) {
            N->nvl = nv;
            N->nvl[N->nnvl++] = (struct nvl){a->p, b->p, sg, dg, bytes, a->mono};
        }
    }
    for (size_t i = 0; i < N->nedges; i++) {
        struct edge *e = &N->edges[i];
        if (!strcmp(e->src_host, sh) && !strcmp(e->dst_host, dh) && e->src_gpu == sg &&
            e->dst_gpu == dg && e->src_nic == snic && e->dst_nic == dnic && e->source == source) {
            e->bytes += bytes;
            return;
        }
    }
    struct edge *ne = realloc(N->edges, (N->nedges + 1) * sizeof(*ne));
    if (!ne)
        return;
    N->edges = ne;
    N->edges[N->nedges++] = (struct edge){sh, dh, sg, dg, snic, dnic, source, bytes};
}

/* One directed edge of a communicator's routing: from call a to call b of an instance (offsets,
 * ranks in order), through NICs (names interned in the plan), carrying `frac` of the bus bytes. */
struct plan_edge {
    int a, b;
    const char *snic, *dnic;
    double frac;
};
#define PLAN_HOSTS 64
struct plan {
    uint64_t comm_id;
    int nranks, ok;
    struct plan_edge *e;
    size_t n;
    char (*names)[64]; /* NIC names the edges point into */
    size_t nnames;
    struct icx_ring_graph *g; /* the graph NCCL dumped for it, applied to every host */
};

static const char *plan_name(struct plan *P, const char *name)
{
    for (size_t i = 0; i < P->nnames; i++)
        if (!strcmp(P->names[i], name))
            return P->names[i];
    snprintf(P->names[P->nnames], 64, "%s", name);
    return P->names[P->nnames++];
}

/* The graph NCCL dumped for communicator `id` (by whichever rank wrote it: rank 0 by default),
 * else one of unknown communicator (format 1.2 traces); with its topology XML. */
static struct icx_ring_graph *graph_of(const struct call *v, size_t i, size_t j, uint64_t id)
{
    for (int strict = 1; strict >= 0; strict--)
        for (size_t k = i; k < j; k++) {
            const struct icx_proc *p = v[k].p;
            for (size_t d = p->ndumps; d-- > 0;)
                if (p->dumps[d].kind == 2 && p->dumps[d].text &&
                    p->dumps[d].comm_id == (strict ? id : 0))
                    return icx_ring_graph_parse(p->dumps[d].text,
                                                icx_nccl_dump_for(p, 1, p->dumps[d].comm_id));
        }
    return NULL;
}

/* The graph routing of the instance v[i..j) (all ranks, in rank order); P->ok 0 when NCCL's
 * graph does not cover it.  NCCL dumps one rank's view; nodes are taken to be alike (as NCCL's
 * own search assumes): the graph's CUDA devices must be exactly the communicator's on every host. */
static void plan_build(struct plan *P, const struct call *v, size_t i, size_t j)
{
    size_t R = j - i;
    const char *hosts[PLAN_HOSTS];
    int nh = 0, *host_of = calloc(R, sizeof(int)), *gpu = calloc(R, sizeof(int));
    P->ok = 0;
    if (!host_of || !gpu || !(P->g = graph_of(v, i, j, v[i].comm_id)))
        goto out;
    for (size_t k = 0; k < R; k++) {
        const char *h = v[i + k].p->host ? v[i + k].p->host : "?";
        int x = 0;
        while (x < nh && strcmp(hosts[x], h))
            x++;
        if (x == nh) {
            if (nh == PLAN_HOSTS)
                goto out;
            hosts[nh++] = h;
        }
        host_of[k] = x;
        if ((gpu[k] = comm_gpu(v[i + k].p, v[i + k].comm_id)) < 0)
            goto out;
    }
    int C = P->g->nchannels;
    P->names = calloc((size_t)(2 * C * nh + 1), sizeof(*P->names));
    P->e = calloc((size_t)C * R + 1, sizeof(*P->e));
    if (!P->names || !P->e)
        goto out;
    for (int c = 0; c < C; c++)
        for (int h = 0; h < nh; h++) {
            const struct icx_ring_channel *ch = &P->g->ch[c];
            int member[ICX_GRAPH_MAX_GPUS], on_host = 0;
            for (size_t k = 0; k < R; k++)
                on_host += host_of[k] == h;
            if (ch->ngpus != on_host)
                goto out;
            for (int x = 0; x < ch->ngpus; x++) { /* the call of the channel's x-th GPU */
                member[x] = -1;
                for (size_t k = 0; k < R; k++)
                    if (host_of[k] == h && gpu[k] == ch->gpu[x])
                        member[x] = (int)k;
                if (member[x] < 0)
                    goto out;
            }
            for (int x = 0; x + 1 < ch->ngpus; x++)
                P->e[P->n++] = (struct plan_edge){member[x], member[x + 1], NULL, NULL, 1.0 / C};
            /* leave the host: to the first GPU of the next host's channel, or round to our own */
            int nx = (h + 1) % nh, to = -1;
            const struct icx_ring_channel *nc = &P->g->ch[c];
            for (size_t k = 0; k < R; k++)
                if (host_of[k] == nx && gpu[k] == nc->gpu[0])
                    to = (int)k;
            if (to < 0)
                goto out;
            const char *sn = nh > 1 && ch->net_out >= 0 ? plan_name(P, ch->out_name) : NULL;
            const char *dn = nh > 1 && nc->net_in >= 0 ? plan_name(P, nc->in_name) : NULL;
            P->e[P->n++] = (struct plan_edge){member[ch->ngpus - 1], to, sn, dn, 1.0 / C};
        }
    P->ok = 1;
out:
    free(host_of);
    free(gpu);
}

static void links(struct icx_nccl *N, const struct call *v, size_t n)
{
    struct plan *plans = NULL;
    size_t np = 0;
    for (size_t i = 0; i < n;) {
        size_t j = instance_end(v, n, i);
        if (v[i].op < 8 && j - i == (size_t)v[i].nranks && j - i > 1) {
            struct plan *P = NULL;
            for (size_t q = 0; q < np && !P; q++)
                if (plans[q].comm_id == v[i].comm_id && plans[q].nranks == v[i].nranks)
                    P = &plans[q];
            if (!P) {
                struct plan *nplans = realloc(plans, (np + 1) * sizeof(*plans));
                if (!nplans)
                    break;
                plans = nplans;
                P = &plans[np++];
                memset(P, 0, sizeof(*P));
                P->comm_id = v[i].comm_id;
                P->nranks = v[i].nranks;
                plan_build(P, v, i, j);
                if (P->ok)
                    N->comms_graph++;
                else
                    N->comms_ring++;
            }
            double R = (double)v[i].nranks;
            if (P->ok)
                for (size_t e = 0; e < P->n; e++) {
                    const struct call *a = &v[i + (size_t)P->e[e].a];
                    edge_add(N, a, &v[i + (size_t)P->e[e].b], P->e[e].snic, P->e[e].dnic, "graph",
                             (double)a->bytes * size_mult(a->op, R) * bus_factor(a->op, R) *
                                 P->e[e].frac);
                }
            else
                for (size_t k = i; k < j; k++) { /* sorted by rank: the next is the next element */
                    const struct call *to = k + 1 < j ? &v[k + 1] : &v[i];
                    edge_add(N, &v[k], to, NULL, NULL, "ring model",
                             (double)v[k].bytes * size_mult(v[k].op, R) * bus_factor(v[k].op, R));
                }
        } else if (v[i].op >= 8 && j - i == 2) {
            const struct call *s = v[i].op == 8 ? &v[i] : &v[i + 1], *r = s == &v[i] ? &v[i + 1] : &v[i];
            edge_add(N, s, r, NULL, NULL, "p2p", (double)s->bytes);
        }
        i = j;
    }
    /* The edges point into the plans' name tables: the report keeps them. */
    char (**keep)[64] = realloc(N->names, (N->nnames + np + 1) * sizeof(*keep));
    for (size_t q = 0; q < np; q++) {
        free(plans[q].g);
        free(plans[q].e);
        if (keep)
            keep[N->nnames++] = plans[q].names;
    }
    if (keep)
        N->names = keep;
    else
        N->nedges = 0; /* cannot keep the names: drop the links rather than point at freed ones */
    free(plans);
    /* Per NIC: the network edges leaving and entering through it. */
    for (size_t i = 0; i < 2 * N->nedges; i++) {
        const struct edge *e = &N->edges[i / 2];
        const char *host = i % 2 ? e->dst_host : e->src_host, *nic = i % 2 ? e->dst_nic : e->src_nic;
        if (!nic)
            continue;
        size_t k = 0;
        while (k < N->nnics && (strcmp(N->nics[k].host, host) || strcmp(N->nics[k].nic, nic)))
            k++;
        if (k == N->nnics) {
            struct nicsum *nn = realloc(N->nics, (N->nnics + 1) * sizeof(*nn));
            if (!nn)
                continue;
            N->nics = nn;
            N->nics[N->nnics++] = (struct nicsum){host, nic, 0, 0};
        }
        if (i % 2)
            N->nics[k].rx += e->bytes;
        else
            N->nics[k].tx += e->bytes;
    }
}

/* The NCCL calls process p was inside when its trace ended: per thread, a pending (entry) record
 * with no return record after it on that thread; and calls whose GPU work was still running.
 * Returns how many, filling out[] (indices). */
static size_t in_flight(const struct icx_proc *p, size_t *out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < p->nncalls; i++) {
        const struct icx_rd_ncall *c = &p->ncalls[i];
        if (!c->pending)
            continue;
        int returned = 0;
        for (size_t k = i + 1; k < p->nncalls && !returned; k++) {
            const struct icx_rd_ncall *x = &p->ncalls[k];
            if (x->tid != c->tid)
                continue;
            returned = !x->pending && x->api == c->api && x->seq == c->seq;
            if (x->pending) /* the thread entered another call: this one had returned */
                returned = 1;
        }
        if (!returned && n < max)
            out[n++] = i;
    }
    /* Returned (NCCL only enqueued it) but its GPU work never finished: running when the trace
     * ended.  Queued work (not started) is behind something else and is not where a rank waits.
     * Without a final flush a span may just not have been written yet: only calls older than a
     * second before the trace's end count then. */
    for (size_t i = 0; i < p->nncalls; i++) {
        const struct icx_rd_ncall *c = &p->ncalls[i];
        if (c->pending || c->api == ICX_API_ncclGroupEnd)
            continue;
        if ((c->gpu == ICX_GPU_RUNNING ||
             (c->gpu == ICX_GPU_UNKNOWN && !p->ended && c->t_enter < p->t_last - 1.0)) &&
            n < max)
            out[n++] = i;
    }
    return n;
}

static const char *end_of(const struct icx_proc *p, char *buf, size_t len)
{
    if (!p->ended)
        snprintf(buf, len, "its trace stops there (the process was killed without a flush)");
    else if (p->exit_status > 128)
        snprintf(buf, len, "it was ended by signal %d", p->exit_status - 128);
    else
        snprintf(buf, len, "it exited with status %d", p->exit_status);
    return buf;
}

static void hangs(const struct icx_trace *t, struct icx_nccl *N, struct icx_findings *F)
{
    double t0 = INFINITY;
    for (size_t i = 0; i < t->nprocs; i++)
        if (t->procs[i]->nclocks)
            t0 = fmin(t0, (double)t->procs[i]->clocks[0].real_ns / 1e9);
    for (size_t ci = 0; ci < N->n; ci++) {
        struct comm *c = &N->v[ci];
        struct stuck *s = &c->stuck;
        /* who is inside which collective of this communicator */
        for (size_t i = 0; i < t->nprocs; i++) {
            const struct icx_proc *p = t->procs[i];
            size_t fl[64], nf = in_flight(p, fl, 64);
            for (size_t k = 0; k < nf; k++) {
                const struct icx_rd_ncall *x = &p->ncalls[fl[k]];
                const struct icx_rd_ncomm *cm = comm_of(p, x->comm, x->t_enter);
                int op = op_of(x->api);
                if (!cm || cm->comm_id != c->id || op >= 8)
                    continue;
                if (!s->nwaiting || x->seq < s->seq) { /* the earliest collective anyone waits in */
                    free(s->waiting);
                    s->waiting = NULL;
                    s->nwaiting = s->ongpu = s->unknown = s->behind = 0;
                    s->seq = x->seq;
                    s->op = op;
                    s->since = INFINITY;
                }
                if (x->seq != s->seq)
                    continue;
                int *w = realloc(s->waiting, (size_t)(s->nwaiting + 1) * sizeof(int));
                if (!w)
                    continue;
                s->waiting = w;
                s->waiting[s->nwaiting++] = cm->rank;
                s->ongpu += x->gpu == ICX_GPU_RUNNING;
                s->unknown += !x->pending && x->gpu == ICX_GPU_UNKNOWN;
                /* behind another of this process's stuck calls, issued earlier on the same stream
                 * on another communicator: it cannot have started */
                int behind = 0;
                for (size_t q = 0; !x->pending && q < nf && !behind; q++) {
                    const struct icx_rd_ncall *y = &p->ncalls[fl[q]];
                    const struct icx_rd_ncomm *cy = comm_of(p, y->comm, y->t_enter);
                    behind = y != x && y->stream == x->stream && y->t_enter < x->t_enter && cy &&
                             cy->comm_id != c->id;
                }
                s->behind += behind;
                double since = x->gpu == ICX_GPU_RUNNING ? x->gpu_start : x->t_enter;
                s->since = fmin(s->since, since + wall_offset(p) - t0);
            }
        }
        if (!s->nwaiting || s->behind == s->nwaiting)
            continue; /* nobody, or every waiter is queued behind a stuck call elsewhere */
        /* who never got there: traced ranks whose last collective on it is before seq */
        char who[1000] = "", ev[1400], end[128];
        int len = 0;
        for (size_t i = 0; i < t->nprocs; i++) {
            const struct icx_proc *p = t->procs[i];
            int rank = -1;
            uint64_t last_seq = 0;
            int last_op = 11;
            const struct icx_rd_ncall *last = NULL;
            for (size_t k = 0; k < p->nncalls; k++) {
                const struct icx_rd_ncall *x = &p->ncalls[k];
                const struct icx_rd_ncomm *cm = comm_of(p, x->comm, x->t_enter);
                if (!cm || cm->comm_id != c->id)
                    continue;
                rank = cm->rank;
                if (op_of(x->api) < 8 && x->seq > last_seq) {
                    last_seq = x->seq;
                    last_op = op_of(x->api);
                }
                last = x;
            }
            if (rank < 0 || last_seq >= s->seq)
                continue;
            int *m = realloc(s->missing, (size_t)(s->nmissing + 1) * sizeof(int));
            if (!m)
                continue;
            s->missing = m;
            s->missing[s->nmissing++] = rank;
            const struct icx_rd_ncall *any = p->nncalls ? &p->ncalls[p->nncalls - 1] : last;
            if (len < (int)sizeof(who) - 200)
                len += snprintf(who + len, sizeof(who) - (size_t)len,
                                "%srank %d (%s pid %d) reached %s #%llu last; its last NCCL call "
                                "was %s at %.3f s; %s", s->nmissing > 1 ? "; " : "", rank,
                                p->host ? p->host : "?", p->pid, op_names[last_op],
                                (unsigned long long)last_seq,
                                any ? op_names[op_of(any->api)] : "none",
                                any ? any->t_enter + wall_offset(p) - t0 : 0.0,
                                end_of(p, end, sizeof(end)));
        }
        snprintf(ev, sizeof(ev), "%d of %d ranks wait in %s #%llu of communicator %016llx since "
                 "%.3f s into the job (%d inside its GPU work, %d in the host call, %d with GPU work "
                 "not known to have finished); %s",
                 s->nwaiting, c->nranks, op_names[s->op], (unsigned long long)s->seq,
                 (unsigned long long)c->id, s->since, s->ongpu,
                 s->nwaiting - s->ongpu - s->unknown, s->unknown,
                 s->nmissing ? who : "every traced rank entered it (an untraced rank or the "
                                     "network is missing)");
        /* one finding per missing rank (its host and pid), or one for the communicator */
        for (int m = 0; m < s->nmissing || (m == 0 && !s->nmissing); m++) {
            const struct icx_proc *p = NULL;
            for (size_t i = 0; s->nmissing && i < t->nprocs && !p; i++)
                for (size_t k = 0; k < t->procs[i]->nncomms && !p; k++)
                    if (t->procs[i]->ncomms[k].comm_id == c->id &&
                        t->procs[i]->ncomms[k].rank == s->missing[m])
                        p = t->procs[i];
            struct icx_proc none = {0};
            none.pid = -1;
            none.rank = s->nmissing ? s->missing[m] : -1;
            icx_finding_add(F, "hang", p ? p : &none, ev,
                            "find what the named rank is doing instead (py-spy or gdb on it: a "
                            "dead-locked data loader, an exception swallowed on that rank, a "
                            "collective issued in a different order); the others cannot proceed");
        }
    }
}

struct icx_nccl *icx_nccl_compute(const struct icx_trace *t, struct icx_findings *F)
{
    struct icx_nccl *N = calloc(1, sizeof(*N));
    if (!N)
        return NULL;
    size_t n = 0;
    struct call *v = collect(t, &n);
    if (n) /* qsort(NULL, 0) is undefined */
        qsort(v, n, sizeof(*v), call_cmp);
    /* Calls and bytes per rank and op. */
    for (size_t i = 0; i < n; i++) {
        struct comm *c = comm_get(N, v[i].comm_id, v[i].nranks);
        if (!c)
            continue;
        c->op[v[i].op].calls++;
        c->op[v[i].op].bytes += v[i].bytes;
        c->op[v[i].op].hist[size_class(v[i].bytes)]++;
    }
    for (size_t ci = 0; ci < N->n; ci++) {
        struct comm *c = &N->v[ci];
        uint64_t *per = calloc((size_t)c->nranks * NOPS + 1, sizeof(uint64_t));
        char *seen = calloc((size_t)c->nranks + 1, 1);
        for (size_t i = 0; per && seen && i < n; i++)
            if (v[i].comm_id == c->id && v[i].rank >= 0 && v[i].rank < c->nranks) {
                per[(size_t)v[i].rank * NOPS + (size_t)v[i].op]++;
                seen[v[i].rank] = 1;
            }
        for (int r = 0; per && seen && r < c->nranks; r++) {
            c->traced += seen[r];
            for (int o = 0; seen[r] && o < NOPS; o++) {
                uint64_t x = per[(size_t)r * NOPS + (size_t)o];
                struct opstat *s = &c->op[o];
                s->min_calls = c->traced == 1 || x < s->min_calls ? x : s->min_calls;
                s->max_calls = x > s->max_calls ? x : s->max_calls;
            }
        }
        free(per);
        free(seen);
    }
    /* Non-blocking creations. */
    for (size_t pi = 0; pi < t->nprocs; pi++)
        for (size_t k = 0; k < t->procs[pi]->nncomms; k++) {
            const struct icx_rd_ncomm *x = &t->procs[pi]->ncomms[k];
            for (size_t ci = 0; x->result == 7 /* ncclInProgress */ && ci < N->n; ci++)
                if (N->v[ci].id == x->comm_id)
                    N->v[ci].nonblocking = 1;
        }
    /* The other calls made on each communicator (queries, registration, errors), by API. */
    for (size_t pi = 0; pi < t->nprocs; pi++) {
        const struct icx_proc *p = t->procs[pi];
        for (size_t k = 0; k < p->nncalls; k++) {
            const struct icx_rd_ncall *x = &p->ncalls[k];
            const struct icx_rd_ncomm *cm = x->pending || op_of(x->api) != 11
                                                ? NULL
                                                : comm_of(p, x->comm, x->t_enter);
            struct comm *c = cm ? comm_get(N, cm->comm_id, cm->nranks) : NULL;
            if (!c)
                continue;
            int o = 0;
            while (o < c->nother && c->other[o].api != x->api)
                o++;
            if (o == c->nother && c->nother < 16)
                c->other[c->nother++].api = x->api;
            if (o < c->nother)
                c->other[o].calls++;
        }
    }
    align_clocks(t, N, v, n);
    /* Instances: runs of equal keys after the sort. */
    for (size_t i = 0; i < n;) {
        size_t j = instance_end(v, n, i);
        struct comm *c = comm_get(N, v[i].comm_id, v[i].nranks);
        size_t want = v[i].op >= 8 ? 2 : (size_t)v[i].nranks;
        int op = v[i].op >= 8 ? 8 : v[i].op; /* a pair counts for Send */
        for (size_t k = i; c && k < j; k++) {
            if (v[k].gpu == ICX_GPU_DONE)
                push(&c->op[v[k].op].gpu, &c->op[v[k].op].ngpu, v[k].gpu_end - v[k].gpu_start);
            push(&c->op[v[k].op].host, &c->op[v[k].op].nhost, v[k].exit - v[k].enter);
        }
        if (c && j - i == want) {
            double first = INFINITY, last = -INFINITY, done = -INFINITY, gpu_last = -INFINITY;
            int last_rank = -1, timing = instance_timing(v, i, j);
            for (size_t k = i; k < j; k++) {
                first = fmin(first, v[k].enter);
                if (v[k].enter > last) {
                    last = v[k].enter;
                    last_rank = v[k].rank;
                }
                done = fmax(done, timing == 2 ? v[k].gpu_end : v[k].exit);
                gpu_last = fmax(gpu_last, v[k].gpu_start);
            }
            /* the operation itself: from the last rank's start on the GPU (or host arrival) to
             * the last finish */
            if (timing)
                push(&c->op[op].dur, &c->op[op].ndur, done - (timing == 2 ? gpu_last : last));
            c->op[op].host_timed += timing == 1;
            if (v[i].op < 8 && last_rank >= 0 && last_rank < c->nranks) {
                c->instances++;
                struct rankstat *r = &c->ranks[last_rank];
                r->last++;
                for (size_t k = i; k < j; k++)
                    r->imposed += last - v[k].enter;
                push(&r->skews, &r->nskews, last - first);
                c->total_skew += last - first;
                int *nl = realloc(c->lasts, (c->nskews + 1) * sizeof(int));
                if (nl) {
                    c->lasts = nl;
                    size_t before = c->nskews;
                    push(&c->skews, &c->nskews, last - first);
                    if (c->nskews > before)
                        c->lasts[before] = last_rank;
                }
            }
        }
        i = j;
    }
    /* Time and bandwidth per op: the median instance. */
    for (size_t ci = 0; ci < N->n; ci++) {
        struct comm *c = &N->v[ci];
        for (int o = 0; o < NOPS; o++) {
            struct opstat *s = &c->op[o];
            s->algbw = s->busbw = s->p50 = s->p99 = s->gpu_p50 = s->gpu_p99 = s->host_p50 = NAN;
            if (s->nhost) {
                qsort(s->host, s->nhost, sizeof(double), dcmp);
                s->host_p50 = pct(s->host, s->nhost, 0.5);
            }
            if (s->ngpu) {
                qsort(s->gpu, s->ngpu, sizeof(double), dcmp);
                s->gpu_p50 = pct(s->gpu, s->ngpu, 0.5);
                s->gpu_p99 = pct(s->gpu, s->ngpu, 0.99);
            }
            if (!s->ndur || !s->calls)
                continue;
            qsort(s->dur, s->ndur, sizeof(double), dcmp);
            s->p50 = pct(s->dur, s->ndur, 0.5);
            s->p99 = pct(s->dur, s->ndur, 0.99);
            double per_call = (double)s->bytes / (double)s->calls; /* one rank's buffer */
            if (s->p50 > 0) {
                s->algbw = per_call * size_mult(o, c->nranks) / s->p50;
                s->busbw = s->algbw * bus_factor(o, c->nranks);
            }
        }
        for (int r = 0; r < c->nranks && c->total_skew > 0; r++) {
            struct rankstat *x = &c->ranks[r];
            if (x->nskews < 3 || 4 * x->nskews < c->instances)
                continue;
            double mine = 0;
            for (size_t k = 0; k < x->nskews; k++)
                mine += x->skews[k];
            qsort(x->skews, x->nskews, sizeof(double), dcmp);
            double med = pct(x->skews, x->nskews, 0.5);
            double *others = malloc(sizeof(double) * (c->nskews + 1));
            size_t no = 0;
            for (size_t k = 0; others && k < c->nskews; k++)
                if (c->lasts[k] != r)
                    others[no++] = c->skews[k];
            double usual = 0;
            if (others && no) {
                qsort(others, no, sizeof(double), dcmp);
                usual = pct(others, no, 0.5);
            }
            free(others);
            /* the communicator's median instance time, over all its ops */
            double *all = malloc(sizeof(double) * (c->nskews + 1)), typical = 0;
            size_t na = 0;
            for (int o = 0; all && o < 8; o++)
                for (size_t k = 0; k < c->op[o].ndur && na < c->nskews + 1; k++)
                    all[na++] = c->op[o].dur[k];
            if (all && na) {
                qsort(all, na, sizeof(double), dcmp);
                typical = pct(all, na, 0.5);
            }
            free(all);
            if (mine < 0.5 * c->total_skew || med < 5e-3 || med < 4 * usual || med < 0.25 * typical)
                continue;
            char ev[600];
            const struct icx_proc *who = NULL;
            for (size_t k = 0; k < n && !who; k++)
                if (v[k].comm_id == c->id && v[k].rank == r)
                    who = v[k].p;
            char name[64];
            if (who && who->rank >= 0 && who->rank != r)
                snprintf(name, sizeof(name), "rank %d (global rank %d)", r, who->rank);
            else
                snprintf(name, sizeof(name), "rank %d", r);
            snprintf(ev, sizeof(ev), "%s arrived last at %llu of %llu collectives of "
                     "communicator %016llx (%d ranks), %.0f%% of all their arrival skew; median "
                     "lateness %.1f ms; the others waited %.3f s in total for it", name,
                     (unsigned long long)x->last, (unsigned long long)c->instances,
                     (unsigned long long)c->id, c->nranks, 100 * mine / c->total_skew, med * 1e3,
                     x->imposed);
            struct icx_proc none = {0};
            none.pid = -1;
            none.rank = r;
            icx_finding_add(F, "straggler", who ? who : &none, ev,
                            "look at what this rank does before its collectives (data loading, "
                            "host work, a slower GPU or CPU placement); the others idle meanwhile");
        }
    }
    links(N, v, n);
    free(v);
    hangs(t, N, F);
    N->t = t;
    return N;
}

/* NVLink bytes NCCL's routing explains, set against the GPUs' counters: inside each counter
 * row's sampled window, what a GPU sent to / received from another GPU of its host. */
void icx_nccl_explain_counters(const struct icx_nccl *N, struct icx_counters *C)
{
    for (size_t i = 0; N && i < N->nnvl; i++) {
        const struct nvl *x = &N->nvl[i];
        for (int end = 0; end < 2; end++) {
            int dev = end ? x->dst : x->src;
            struct icx_counter_row *r = icx_counter_row_at(C, end ? x->dp : x->sp, dev, x->t);
            if (!r)
                continue;
            if (r->device < 0)
                r->device = dev;
            if (end)
                r->rx_nccl += (uint64_t)(x->bytes + 0.5);
            else
                r->tx_nccl += (uint64_t)(x->bytes + 0.5);
        }
    }
}

void icx_nccl_print(FILE *out, const struct icx_nccl *N)
{
    if (!N || !N->n)
        return;
    fprintf(out, "\nNCCL per communicator (time: one instance, from the last rank's start on the "
                 "GPU to the last finish; GPU: each call's own span)\n");
    fprintf(out, "  %-16s %5s %-13s %7s %13s %9s %9s %9s %11s %5s\n", "communicator", "ranks", "op",
            "calls", "bytes", "p50 ms", "p99 ms", "GPU p50", "busbw GB/s", "from");
    for (size_t i = 0; i < N->n; i++) {
        const struct comm *c = &N->v[i];
        for (int o = 0; o < 10; o++) {
            const struct opstat *s = &c->op[o];
            if (!s->calls)
                continue;
            fprintf(out, "  %016llx %2d/%-2d %-13s %7llu %13llu %9.3f %9.3f %9.3f %11.4g %5s\n",
                    (unsigned long long)c->id, c->traced, c->nranks, op_names[o],
                    (unsigned long long)s->calls, (unsigned long long)s->bytes, s->p50 * 1e3,
                    s->p99 * 1e3, s->gpu_p50 * 1e3, s->busbw / 1e9,
                    !s->ndur ? "-" : s->host_timed ? "host" : "gpu");
        }
        if (c->stuck.nwaiting)
            fprintf(out, "  %16s stuck: %d of %d ranks wait in %s #%llu (%d missing)\n", "",
                    c->stuck.nwaiting, c->nranks, op_names[c->stuck.op],
                    (unsigned long long)c->stuck.seq, c->stuck.nmissing);
    }
    fprintf(out, "  routing: %d communicator(s) along NCCL's own ring graph, %d by the ring model\n",
            N->comms_graph, N->comms_ring);
    int header = 0;
    for (size_t i = 0; i < N->nedges; i++) {
        const struct edge *e = &N->edges[i];
        if (!e->src_nic && !e->dst_nic)
            continue;
        if (!header++)
            fprintf(out, "  %-16s %-10s -> %-16s %-10s %14s\n", "from host", "NIC", "to host",
                    "NIC", "bytes");
        fprintf(out, "  %-16s %-10s -> %-16s %-10s %14.0f\n", e->src_host,
                e->src_nic ? e->src_nic : "?", e->dst_host, e->dst_nic ? e->dst_nic : "?",
                e->bytes);
    }
}

void icx_nccl_json(struct icx_json *j, const struct icx_nccl *N)
{
    icx_json_arr(j, "clock_alignment");
    for (size_t i = 0; N && i < N->nclk; i++) {
        const struct clockfix *c = &N->clk[i];
        if (!c->samples)
            continue;
        icx_json_obj(j, NULL);
        icx_json_str(j, "host", c->p->host ? c->p->host : "");
        icx_json_int(j, "pid", c->p->pid);
        icx_json_int(j, "rank", c->p->rank);
        icx_json_num(j, "offset_s", c->offset);
        icx_json_num(j, "residual_s", c->residual);
        icx_json_int(j, "instances", (long long)c->samples);
        icx_json_end(j);
    }
    icx_json_end(j);
    icx_json_obj(j, "nccl_links");
    icx_json_str(j, "model",
                 N && N->comms_graph && !N->comms_ring
                     ? "graph: NCCL's ring graph (as dumped per host), bus bytes per nccl-tests "
                       "split evenly over its channels; send/recv to their peer"
                 : N && N->comms_graph ? "graph where NCCL's dumped ring graph covers the "
                                         "communicator, else ring over the ranks in order; bus "
                                         "bytes per nccl-tests; send/recv to their peer"
                                       : "ring over the ranks in order, bus bytes per nccl-tests "
                                         "(no NCCL graph covered the communicators); send/recv to "
                                         "their peer");
    icx_json_int(j, "communicators_by_graph", N ? N->comms_graph : 0);
    icx_json_int(j, "communicators_by_ring_model", N ? N->comms_ring : 0);
    icx_json_arr(j, "links");
    for (size_t i = 0; N && i < N->nedges; i++) {
        const struct edge *e = &N->edges[i];
        icx_json_obj(j, NULL);
        icx_json_str(j, "src_host", e->src_host);
        icx_json_int(j, "src_gpu", e->src_gpu);
        icx_json_str(j, "dst_host", e->dst_host);
        icx_json_int(j, "dst_gpu", e->dst_gpu);
        icx_json_str(j, "transport", strcmp(e->src_host, e->dst_host) ? "NET" : "P2P");
        if (e->src_nic)
            icx_json_str(j, "src_nic", e->src_nic);
        else
            icx_json_null(j, "src_nic");
        if (e->dst_nic)
            icx_json_str(j, "dst_nic", e->dst_nic);
        else
            icx_json_null(j, "dst_nic");
        icx_json_str(j, "source", e->source);
        icx_json_num(j, "bytes", e->bytes);
        icx_json_end(j);
    }
    icx_json_end(j);
    /* per NIC: what NCCL's routing put through it (network edges whose NIC the graph names) */
    icx_json_arr(j, "nics");
    for (size_t i = 0; N && i < N->nnics; i++) {
        icx_json_obj(j, NULL);
        icx_json_str(j, "host", N->nics[i].host);
        icx_json_str(j, "nic", N->nics[i].nic);
        icx_json_num(j, "tx_bytes", N->nics[i].tx);
        icx_json_num(j, "rx_bytes", N->nics[i].rx);
        icx_json_end(j);
    }
    icx_json_end(j);
    icx_json_end(j);
    /* What NCCL wrote about itself, each distinct (kind, communicator, text) once with the
     * processes that wrote it */
    icx_json_arr(j, "nccl_dumps");
    for (size_t i = 0; N && N->t && i < N->t->nprocs; i++)
        for (size_t d = 0; d < N->t->procs[i]->ndumps; d++) {
            const struct icx_rd_dump *x = &N->t->procs[i]->dumps[d];
            if (!x->text)
                continue;
            int first = 1;
            for (size_t q = 0; first && q <= i; q++)
                for (size_t e = 0; first && e < (q < i ? N->t->procs[q]->ndumps : d); e++) {
                    const struct icx_rd_dump *y = &N->t->procs[q]->dumps[e];
                    first = !(y->kind == x->kind && y->comm_id == x->comm_id && y->text &&
                              !strcmp(y->text, x->text));
                }
            if (!first)
                continue;
            char id[32];
            snprintf(id, sizeof(id), "%016llx", (unsigned long long)x->comm_id);
            icx_json_obj(j, NULL);
            icx_json_str(j, "kind", x->kind == 3 ? "debug" : x->kind == 2 ? "graph" : "topology");
            if (x->comm_id)
                icx_json_str(j, "comm_id", id);
            else
                icx_json_null(j, "comm_id");
            icx_json_int(j, "bytes", (long long)strlen(x->text));
            icx_json_arr(j, "pids");
            for (size_t q = i; q < N->t->nprocs; q++) {
                int has = 0;
                for (size_t e = 0; !has && e < N->t->procs[q]->ndumps; e++) {
                    const struct icx_rd_dump *y = &N->t->procs[q]->dumps[e];
                    has = y->kind == x->kind && y->comm_id == x->comm_id && y->text &&
                          !strcmp(y->text, x->text);
                }
                if (has)
                    icx_json_int(j, NULL, N->t->procs[q]->pid);
            }
            icx_json_end(j);
            icx_json_str(j, x->kind == 3 ? "text" : "xml", x->text);
            icx_json_end(j);
        }
    icx_json_end(j);
    icx_json_arr(j, "collectives");
    for (size_t i = 0; N && i < N->n; i++) {
        const struct comm *c = &N->v[i];
        char id[32];
        snprintf(id, sizeof(id), "%016llx", (unsigned long long)c->id);
        icx_json_obj(j, NULL);
        icx_json_str(j, "comm_id", id);
        icx_json_int(j, "nranks", c->nranks);
        icx_json_int(j, "ranks_traced", c->traced);
        icx_json_int(j, "collective_instances", (long long)c->instances);
        icx_json_bool(j, "nonblocking_init", c->nonblocking);
        icx_json_obj(j, "other_calls");
        for (int o = 0; o < c->nother; o++)
            icx_json_int(j, icx_api_name(c->other[o].api), (long long)c->other[o].calls);
        icx_json_end(j);
        icx_json_arr(j, "ops");
        for (int o = 0; o < 10; o++) {
            const struct opstat *s = &c->op[o];
            if (!s->calls)
                continue;
            icx_json_obj(j, NULL);
            icx_json_str(j, "op", op_names[o]);
            icx_json_int(j, "calls", (long long)s->calls);
            icx_json_int(j, "calls_per_rank_min", (long long)s->min_calls);
            icx_json_int(j, "calls_per_rank_max", (long long)s->max_calls);
            icx_json_int(j, "bytes", (long long)s->bytes);
            icx_json_arr(j, "size_histogram");
            for (int k = 0; k < 66; k++)
                if (s->hist[k]) {
                    icx_json_obj(j, NULL);
                    icx_json_num(j, "max_bytes", k ? ldexp(1.0, k - 1) : 0);
                    icx_json_int(j, "calls", (long long)s->hist[k]);
                    icx_json_end(j);
                }
            icx_json_end(j);
            icx_json_int(j, "instances_timed", (long long)s->ndur);
            icx_json_str(j, "timing", !s->ndur ? "none" : s->host_timed ? "host" : "gpu");
            icx_json_num(j, "time_p50_s", s->p50);
            icx_json_num(j, "time_p99_s", s->p99);
            icx_json_int(j, "gpu_timed_calls", (long long)s->ngpu);
            icx_json_num(j, "gpu_time_p50_s", s->gpu_p50);
            icx_json_num(j, "gpu_time_p99_s", s->gpu_p99);
            icx_json_num(j, "host_call_p50_s", s->host_p50);
            icx_json_num(j, "algbw_bytes_per_s", s->algbw);
            icx_json_num(j, "busbw_bytes_per_s", s->busbw);
            icx_json_end(j);
        }
        icx_json_end(j);
        const struct stuck *st = &c->stuck;
        if (st->nwaiting) {
            icx_json_obj(j, "stuck");
            icx_json_str(j, "op", op_names[st->op]);
            icx_json_int(j, "seq", (long long)st->seq);
            icx_json_num(j, "since_s", st->since);
            icx_json_int(j, "waiting_on_gpu", st->ongpu);
            icx_json_int(j, "waiting_unknown", st->unknown);
            icx_json_bool(j, "queued_behind", st->behind == st->nwaiting);
            icx_json_arr(j, "waiting_ranks");
            for (int k = 0; k < st->nwaiting; k++)
                icx_json_int(j, NULL, st->waiting[k]);
            icx_json_end(j);
            icx_json_arr(j, "missing_ranks");
            for (int k = 0; k < st->nmissing; k++)
                icx_json_int(j, NULL, st->missing[k]);
            icx_json_end(j);
            icx_json_end(j);
        } else {
            icx_json_null(j, "stuck");
        }
        icx_json_arr(j, "last_arrivals");
        for (int r = 0; r < c->nranks; r++)
            if (c->ranks[r].last) {
                icx_json_obj(j, NULL);
                icx_json_int(j, "rank", r);
                icx_json_int(j, "times_last", (long long)c->ranks[r].last);
                icx_json_num(j, "wait_imposed_s", c->ranks[r].imposed);
                icx_json_end(j);
            }
        icx_json_end(j);
        icx_json_end(j);
    }
    icx_json_end(j);
}

void icx_nccl_free(struct icx_nccl *N)
{
    if (!N)
        return;
    for (size_t i = 0; i < N->n; i++) {
        for (int o = 0; o < NOPS; o++) {
            free(N->v[i].op[o].dur);
            free(N->v[i].op[o].gpu);
            free(N->v[i].op[o].host);
        }
        for (int r = 0; N->v[i].ranks && r < N->v[i].nranks; r++)
            free(N->v[i].ranks[r].skews);
        free(N->v[i].stuck.waiting);
        free(N->v[i].skews);
        free(N->v[i].lasts);
        free(N->v[i].stuck.missing);
        free(N->v[i].ranks);
    }
    free(N->v);
    free(N->clk);
    free(N->edges);
    free(N->nvl);
    free(N->nics);
    for (size_t i = 0; i < N->nnames; i++)
        free(N->names[i]);
    free(N->names);
    free(N);
}
