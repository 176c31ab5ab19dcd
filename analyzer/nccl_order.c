/* The NCCL report, part: collectives entered in opposite orders.  A rank's NCCL calls run on its
 * stream one after the other, so when rank A issues communicator X's call before communicator Y's
 * and rank B issues Y's before X's, A's X waits for B's X, queued behind B's Y, which waits for
 * A's Y, queued behind A's X: a deadlock in which every rank has issued every call, so no rank is
 * missing and no call differs.  Found as a cycle of the wait-for graph of the calls still
 * unfinished when the traces end: rank P -> rank Q when the call running at the head of P's stream
 * waits for Q's copy of it, which is queued on Q's stream behind a call of another communicator.
 * Named, as a `collective_mismatch`, are the ranks whose order is the minority's (all the cycle's
 * when there is no majority). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_model.h"

/* A collective call of one process not known to have finished, and the stream queue it is in. */
struct uf {
    uint64_t comm, seq, stream;
    int op, rank, proc; /* rank in the communicator; proc: index in the trace */
    uint32_t group;     /* the process's group id (0: outside a group) */
    double enter;
    size_t head; /* index (in the sorted array) of the first unfinished call of its stream */
};

struct edge2 {
    int from, to;    /* processes */
    size_t run, blk; /* from's running call; the call to's copy of it is queued behind */
};

static int uf_cmp(const void *a, const void *b)
{
    const struct uf *x = a, *y = b;
    if (x->proc != y->proc)
        return icx_cmp_int(x->proc, y->proc);
    if (x->stream != y->stream)
        return x->stream < y->stream ? -1 : 1;
    return x->enter < y->enter ? -1 : x->enter > y->enter;
}

/* Is call k of p unfinished when its trace ends?  The entry of a call that never returned, or a
 * returned call whose GPU work is running, queued, or (without a final flush, older than a second
 * before the trace's end) not known to have finished. */
static int unfinished(const struct icx_proc *p, size_t k)
{
    const struct icx_rd_ncall *c = &p->ncalls[k];
    if (c->pending)
        return !icx_nccl_entry_returned(p, k);
    return c->gpu == ICX_GPU_RUNNING || c->gpu == ICX_GPU_QUEUED ||
           (c->gpu == ICX_GPU_UNKNOWN && (p->ended || c->t_enter < p->t_last - 1.0));
}

static struct uf *collect_unfinished(const struct icx_trace *t, size_t *count)
{
    struct uf *v = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < t->nprocs; i++) {
        const struct icx_proc *p = t->procs[i];
        for (size_t k = 0; k < p->nncalls; k++) {
            const struct icx_rd_ncall *c = &p->ncalls[k];
            int op = icx_nccl_op_of(c->api);
            if (op >= 8 || !c->seq || !unfinished(p, k))
                continue;
            const struct icx_rd_ncomm *cm = icx_nccl_comm_of(p, c->comm, c->t_enter);
            if (!cm || icx_grow((void **)&v, &cap, n, sizeof(*v)))
                continue;
            v[n++] = (struct uf){.comm = cm->comm_id,
                                 .seq = c->seq,
                                 .stream = c->stream,
                                 .op = op,
                                 .rank = cm->rank,
                                 .proc = (int)i,
                                 .group = c->group,
                                 .enter = c->t_enter};
        }
    }
    if (n)
        qsort(v, n, sizeof(*v), uf_cmp);
    for (size_t i = 0; i < n; i++)
        v[i].head =
            i && v[i - 1].proc == v[i].proc && v[i - 1].stream == v[i].stream ? v[i - 1].head : i;
    *count = n;
    return v;
}

/* P -> Q for every call at the head of P's stream whose copy at Q is queued behind another
 * communicator's call. */
static struct edge2 *wait_edges(const struct uf *v, size_t n, size_t *count)
{
    struct edge2 *e = NULL;
    size_t ne = 0, cap = 0;
    for (size_t x = 0; x < n; x++) {
        if (v[x].head != x)
            continue;
        for (size_t z = 0; z < n; z++) {
            const struct uf *h = &v[v[z].head];
            if (v[z].proc == v[x].proc || v[z].comm != v[x].comm || v[z].seq != v[x].seq ||
                v[z].head == z || h->comm == v[x].comm || (h->group && h->group == v[z].group))
                continue; /* a group's calls run together, whatever their order in it */
            if (!icx_grow((void **)&e, &cap, ne, sizeof(*e)))
                e[ne++] = (struct edge2){v[x].proc, v[z].proc, x, v[z].head};
        }
    }
    *count = ne;
    return e;
}

/* A cycle of the graph: its edges' indices into e, in order, or 0 when there is none. */
static size_t find_cycle(const struct edge2 *e, size_t ne, int nprocs, size_t *cyc, size_t max)
{
    int *color = calloc((size_t)nprocs, sizeof(int)); /* 0 new, 1 on the path, 2 done */
    size_t *path = malloc((size_t)nprocs * sizeof(size_t)),
           *next = calloc((size_t)nprocs, sizeof(size_t));
    int *node = malloc((size_t)nprocs * sizeof(int));
    size_t found = 0;
    for (int s = 0; color && path && next && node && s < nprocs && !found; s++) {
        if (color[s])
            continue;
        size_t depth = 0; /* node[0..depth] the path; path[d] the edge from node[d] */
        node[0] = s;
        color[s] = 1;
        next[0] = 0;
        for (;;) {
            int u = node[depth];
            size_t k = next[depth];
            while (k < ne && e[k].from != u)
                k++;
            if (k == ne) { /* u done */
                color[u] = 2;
                if (depth-- == 0)
                    break;
                continue;
            }
            next[depth] = k + 1;
            int w = e[k].to;
            if (color[w] == 1) { /* back to the path: the cycle runs from w to u, then k */
                size_t d = 0;
                while (node[d] != w)
                    d++;
                for (; d < depth && found < max; d++)
                    cyc[found++] = path[d];
                if (found < max)
                    cyc[found++] = k;
                break;
            }
            if (color[w] == 0 && depth + 1 < (size_t)nprocs) {
                path[depth] = k;
                node[++depth] = w;
                next[depth] = 0;
                color[w] = 1;
            }
        }
    }
    free(color);
    free(path);
    free(next);
    free(node);
    return found;
}

/* Where process proc has unfinished (comm, seq): its index in v, or SIZE_MAX. */
static size_t find_call(const struct uf *v, size_t n, int proc, uint64_t comm, uint64_t seq)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].proc == proc && v[i].comm == comm && v[i].seq == seq)
            return i;
    return SIZE_MAX;
}

static void add_mism(struct icx_nccl *N, uint64_t comm, uint64_t seq)
{
    struct mism *mm = realloc(N->mism, (N->nmism + 1) * sizeof(*mm));
    if (mm) {
        N->mism = mm;
        mm[N->nmism++] = (struct mism){comm, seq, 1};
    }
}

/* The finding for a cycle whose first edge runs call a (comm A) against b (comm B). */
static void report(const struct icx_trace *t, struct icx_nccl *N, const struct uf *v, size_t n,
                   const struct uf *a, const struct uf *b, struct icx_findings *F)
{
    int ab = 0, ba = 0; /* processes that issued A's call first, B's first */
    for (size_t i = 0; i < t->nprocs; i++) {
        size_t x = find_call(v, n, (int)i, a->comm, a->seq);
        size_t y = find_call(v, n, (int)i, b->comm, b->seq);
        if (x != SIZE_MAX && y != SIZE_MAX && v[x].stream == v[y].stream)
            v[x].enter < v[y].enter ? ab++ : ba++;
    }
    int named_ab = ab <= ba, others = named_ab ? ba : ab; /* name the minority */
    char who[900] = "", ev[1600];
    size_t o = 0;
    int nn = 0;
    const struct icx_proc *first = NULL;
    for (size_t i = 0; i < t->nprocs; i++) {
        size_t x = find_call(v, n, (int)i, a->comm, a->seq);
        size_t y = find_call(v, n, (int)i, b->comm, b->seq);
        if (x == SIZE_MAX || y == SIZE_MAX || v[x].stream != v[y].stream ||
            (v[x].enter < v[y].enter) != named_ab)
            continue;
        const struct icx_proc *p = t->procs[i];
        first = first ? first : p;
        if (o + 120 < sizeof(who))
            o += (size_t)snprintf(who + o, sizeof(who) - o, "%s%d (%s)", nn ? ", " : "", p->rank,
                                  p->host ? p->host : "?");
        nn++;
    }
    const struct uf *fa = named_ab ? a : b, *fb = named_ab ? b : a;
    snprintf(ev, sizeof(ev),
             "%s %s issued %s #%llu of communicator %016llx before %s #%llu of communicator "
             "%016llx, %d other rank%s the reverse%s; each rank's stream runs them in its order, "
             "so the first waits for ranks that have it queued behind the second: a deadlock of "
             "the %d ranks that issued both, though none is missing a call",
             nn == 1 ? "rank" : "ranks", who, icx_nccl_op_names[fa->op],
             (unsigned long long)fa->seq, (unsigned long long)fa->comm, icx_nccl_op_names[fb->op],
             (unsigned long long)fb->seq, (unsigned long long)fb->comm, others,
             others == 1 ? "" : "s", ab == ba ? " (neither order has a majority)" : "", ab + ba);
    icx_finding_add(F, "collective_mismatch", first ? first : t->procs[a->proc], ev,
                    "issue the collectives of different communicators in the same order on every "
                    "rank (or on separate streams): look for a rank-conditional call or a "
                    "communicator used by one rank ahead of the others");
    add_mism(N, a->comm, a->seq);
    add_mism(N, b->comm, b->seq);
}

void icx_nccl_order_cycles(const struct icx_trace *t, struct icx_nccl *N, struct icx_findings *F)
{
    size_t n, ne;
    struct uf *v = collect_unfinished(t, &n);
    struct edge2 *e = wait_edges(v, n, &ne);
    size_t cyc[64];
    size_t len = ne && t->nprocs ? find_cycle(e, ne, (int)t->nprocs, cyc, 64) : 0;
    if (len) {
        const struct uf *a = &v[e[cyc[0]].run], *b = &v[e[cyc[0]].blk];
        int known = 0; /* a call mismatch there already explains it */
        for (size_t k = 0; k < N->nmism; k++)
            known |= (N->mism[k].comm_id == a->comm && N->mism[k].seq == a->seq) ||
                     (N->mism[k].comm_id == b->comm && N->mism[k].seq == b->seq);
        if (!known)
            report(t, N, v, n, a, b, F);
    }
    free(e);
    free(v);
}
