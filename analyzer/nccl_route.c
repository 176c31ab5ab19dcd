/* The NCCL report, part: per-link and per-NIC traffic along NCCL's own ring graph, or the ring
 * model, and what of the GPUs' NVLink counters that routing explains. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_graph.h"
#include "nccl_model.h"
#include "report_counters.h"

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
    if (!strcmp(sh, dh) && sg >= 0 && dg >= 0 &&
        sg != dg) { /* over NVLink: when, for the counters */
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
 * own search assumes): the graph's CUDA devices must be exactly the communicator's on every host.
 */
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

void icx_nccl_route(struct icx_nccl *N, const struct call *v, size_t n)
{
    struct plan *plans = NULL;
    size_t np = 0;
    for (size_t i = 0; i < n;) {
        size_t j = icx_nccl_instance_end(v, n, i);
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
                             (double)a->bytes * icx_nccl_size_mult(a->op, R) *
                                 icx_nccl_bus_factor(a->op, R) * P->e[e].frac);
                }
            else
                for (size_t k = i; k < j; k++) { /* sorted by rank: the next is the next element */
                    const struct call *to = k + 1 < j ? &v[k + 1] : &v[i];
                    edge_add(N, &v[k], to, NULL, NULL, "ring model",
                             (double)v[k].bytes * icx_nccl_size_mult(v[k].op, R) *
                                 icx_nccl_bus_factor(v[k].op, R));
                }
        } else if (v[i].op >= 8 && j - i == 2) {
            const struct call *s = v[i].op == 8 ? &v[i] : &v[i + 1],
                              *r = s == &v[i] ? &v[i + 1] : &v[i];
            edge_add(N, s, r, NULL, NULL, "p2p", (double)s->bytes);
        }
        i = j;
    }
    /* The edges point into the plans' name tables: the report keeps them. */
    char(**keep)[64] = realloc(N->names, (N->nnames + np + 1) * sizeof(*keep));
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
        const char *host = i % 2 ? e->dst_host : e->src_host,
                   *nic = i % 2 ? e->dst_nic : e->src_nic;
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

/* NVLink bytes NCCL's routing explains, set against the GPUs' counters: inside each counter
 * row's sampled window, what a GPU sent to / received from another GPU of its host. */
void icx_nccl_explain_counters(const struct icx_nccl *N, struct icx_counters *C)
{
    if (!C)
        return;
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
