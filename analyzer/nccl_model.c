/* The NCCL report's shared model (nccl_model.h): ops, the calls' timeline, instances. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_model.h"

const char *const icx_nccl_op_names[NOPS] = {"AllReduce",     "Broadcast", "Reduce",   "AllGather",
                                             "ReduceScatter", "AlltoAll",  "Gather",   "Scatter",
                                             "Send",          "Recv",      "GroupEnd", "?"};

int icx_nccl_op_of(unsigned api)
{
    switch (api) {
    case ICX_API_ncclAllReduce: return 0;
    case ICX_API_ncclBroadcast:
    case ICX_API_ncclBcast: return 1;
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

int icx_nccl_dcmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int icx_nccl_call_cmp(const void *a, const void *b)
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
    return icx_cmp_int(x->rank, y->rank);
}

struct comm *icx_nccl_comm_get(struct icx_nccl *N, uint64_t id, int nranks)
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

void icx_nccl_push(double **v, size_t *n, double x)
{
    double *nv = realloc(*v, (*n + 1) * sizeof(double));
    if (nv) {
        *v = nv;
        nv[(*n)++] = x;
    }
}

/* The communicator a call of process p used: the latest creation of that handle before it. */
const struct icx_rd_ncomm *icx_nccl_comm_of(const struct icx_proc *p, uint64_t h, double t)
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

int icx_nccl_entry_returned(const struct icx_proc *p, size_t i)
{
    const struct icx_rd_ncall *c = &p->ncalls[i];
    for (size_t k = i + 1; k < p->nncalls; k++) {
        const struct icx_rd_ncall *x = &p->ncalls[k];
        if (x->tid != c->tid)
            continue;
        if (x->pending) /* the thread entered another call: this one had returned */
            return 1;
        if (x->api == c->api && x->seq == c->seq)
            return 1;
    }
    return 0;
}

uint32_t icx_nccl_call_stack(const struct icx_proc *p, size_t i)
{
    const struct icx_rd_ncall *c = &p->ncalls[i];
    for (size_t k = 0; k < p->nncalls; k++) {
        const struct icx_rd_ncall *x = &p->ncalls[k];
        if (x->stack_id && x->api == c->api && x->comm == c->comm && x->count == c->count &&
            x->dtype == c->dtype && x->redop == c->redop && x->peer == c->peer)
            return x->stack_id;
    }
    return 0;
}

double icx_nccl_wall_offset(const struct icx_proc *p)
{
    return p->nclocks ? ((double)p->clocks[0].real_ns - (double)p->clocks[0].mono_ns) / 1e9 : 0;
}

/* Calls of every process on one timeline; a call in a group ends with its group. */
struct call *icx_nccl_collect(const struct icx_trace *t, size_t *ncalls)
{
    size_t n = 0, cap = 0;
    struct call *v = NULL;
    for (size_t i = 0; i < t->nprocs; i++) {
        const struct icx_proc *p = t->procs[i];
        double off = icx_nccl_wall_offset(p);
        for (size_t k = 0; k < p->nncalls; k++) {
            const struct icx_rd_ncall *c = &p->ncalls[k];
            int op = icx_nccl_op_of(c->api);
            if (op >= 10 || c->result != 0 || c->pending)
                continue;
            const struct icx_rd_ncomm *cm = icx_nccl_comm_of(p, c->comm, c->t_enter);
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
            v[n++] = (struct call){cm->comm_id,
                                   c->seq,
                                   c->bytes,
                                   op,
                                   cm->rank,
                                   c->peer,
                                   cm->nranks,
                                   c->t_enter + off,
                                   exit + off,
                                   c->gpu,
                                   c->gpu_start + off,
                                   c->gpu_end + off,
                                   p,
                                   c->t_enter,
                                   c->group};
        }
    }
    *ncalls = n;
    return v;
}

/* The end of the instance starting at v[i]: calls equal in everything but the rank
 * (icx_nccl_call_cmp orders by rank last). */
size_t icx_nccl_instance_end(const struct call *v, size_t n, size_t i)
{
    size_t j = i + 1;
    while (j < n && v[j].comm_id == v[i].comm_id && v[j].seq == v[i].seq &&
           (v[j].op >= 8) == (v[i].op >= 8) &&
           (v[i].op < 8 ||
            ((v[j].op == 8 ? v[j].rank : v[j].peer) == (v[i].op == 8 ? v[i].rank : v[i].peer) &&
             (v[j].op == 8 ? v[j].peer : v[j].rank) == (v[i].op == 8 ? v[i].peer : v[i].rank))))
        j++;
    return j;
}

/* How the instance v[i..j) can be timed: 2 every call's GPU span finished, 1 none GPU-timed
 * (host enter/exit), 0 mixed or unfinished. */
int icx_nccl_instance_timing(const struct call *v, size_t i, size_t j)
{
    int done = 0, untimed = 0;
    for (size_t k = i; k < j; k++) {
        done += v[k].gpu == ICX_GPU_DONE;
        untimed += v[k].gpu == ICX_GPU_UNTIMED;
    }
    return done == (int)(j - i) ? 2 : untimed == (int)(j - i) ? 1 : 0;
}

double icx_nccl_pct(const double *sorted, size_t n, double q)
{
    return n ? sorted[(size_t)(q * (double)(n - 1) + 0.5)] : NAN;
}

double icx_nccl_job_t0(const struct icx_trace *t)
{
    double t0 = INFINITY;
    for (size_t i = 0; i < t->nprocs; i++)
        if (t->procs[i]->nclocks)
            t0 = fmin(t0, (double)t->procs[i]->clocks[0].real_ns / 1e9);
    return t0;
}
