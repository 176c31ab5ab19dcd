/* The NCCL report, part: send/recv pairing.  NCCL pairs rank A's n-th send to B on a communicator
 * with B's n-th receive from A (the tracer numbers both per peer and direction), and the two must
 * agree on the size.  A pair whose sizes differ, or a direction with more sends than receives (or
 * the reverse) by the end, is a `collective_mismatch`: NCCL fails or hangs there, and since the
 * pairs go in order, a skipped receive shifts every later message between the two ranks by one --
 * a job that "runs" with wrong data.  Named is the side that differs from what the communicator's
 * other pairs did (its count or size is not theirs); one finding per communicator. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_model.h"

struct pp {
    uint64_t comm, seq, bytes;
    int src, dst, recv, unfinished; /* ranks in the communicator; recv: 1 a receive */
    double enter;                   /* the process's monotonic s */
    const struct icx_proc *p;       /* who made the call */
};

static int pp_cmp(const void *a, const void *b)
{
    const struct pp *x = a, *y = b;
    if (x->comm != y->comm)
        return x->comm < y->comm ? -1 : 1;
    if (x->src != y->src)
        return icx_cmp_int(x->src, y->src);
    if (x->dst != y->dst)
        return icx_cmp_int(x->dst, y->dst);
    if (x->recv != y->recv)
        return icx_cmp_int(x->recv, y->recv);
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static struct pp *collect_p2p(const struct icx_trace *t, size_t *count)
{
    struct pp *v = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < t->nprocs; i++) {
        const struct icx_proc *p = t->procs[i];
        for (size_t k = 0; k < p->nncalls; k++) {
            const struct icx_rd_ncall *c = &p->ncalls[k];
            int op = icx_nccl_op_of(c->api), open = c->pending && !icx_nccl_entry_returned(p, k);
            if ((op != 8 && op != 9) || !c->seq || (c->pending && !open) ||
                (!c->pending && c->result != 0))
                continue; /* the entry of a call whose return is here; a call NCCL refused */
            const struct icx_rd_ncomm *cm = icx_nccl_comm_of(p, c->comm, c->t_enter);
            if (!cm || icx_grow((void **)&v, &cap, n, sizeof(*v)))
                continue;
            int recv = op == 9;
            v[n++] = (struct pp){.comm = cm->comm_id,
                                 .seq = c->seq,
                                 .bytes = c->bytes,
                                 .src = recv ? c->peer : cm->rank,
                                 .dst = recv ? cm->rank : c->peer,
                                 .recv = recv,
                                 .enter = c->t_enter,
                                 .unfinished =
                                     open || c->gpu == ICX_GPU_RUNNING || c->gpu == ICX_GPU_QUEUED,
                                 .p = p};
        }
    }
    if (n)
        qsort(v, n, sizeof(*v), pp_cmp);
    *count = n;
    return v;
}

/* One direction between two ranks: its sends v[s0..s1), its receives v[r0..r1). */
struct dir {
    size_t s0, s1, r0, r1;
};

static size_t dir_end(const struct pp *v, size_t n, size_t i)
{
    size_t j = i;
    while (j < n && v[j].comm == v[i].comm && v[j].src == v[i].src && v[j].dst == v[i].dst)
        j++;
    return j;
}

static struct dir dir_at(const struct pp *v, size_t i, size_t j)
{
    size_t r = i;
    while (r < j && !v[r].recv)
        r++;
    return (struct dir){i, r, r, j};
}

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The most common of n values (sorted in place); 0 for none. */
static uint64_t mode_u64(uint64_t *x, size_t n)
{
    if (n > 1)
        qsort(x, n, sizeof(*x), u64_cmp);
    uint64_t best = n ? x[0] : 0;
    size_t best_n = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && x[j] == x[i])
            j++;
        if (j - i > best_n) {
            best_n = j - i;
            best = x[i];
        }
        i = j;
    }
    return best;
}

/* What most directions of the communicator v[i..end) did: sends and receives per direction, and
 * the size of a message. */
struct usual {
    uint64_t sends, recvs, bytes;
};

static struct usual usual_of(const struct pp *v, size_t i, size_t end)
{
    struct usual u = {0, 0, 0};
    uint64_t *x = malloc((end - i) * sizeof(*x));
    if (!x)
        return u;
    size_t n = 0;
    for (size_t k = i; k < end; k++)
        x[n++] = v[k].bytes;
    u.bytes = mode_u64(x, n);
    for (int recv = 0; recv < 2; recv++) {
        n = 0;
        for (size_t a = i; a < end; a = dir_end(v, end, a)) {
            struct dir d = dir_at(v, a, dir_end(v, end, a));
            x[n++] = recv ? d.r1 - d.r0 : d.s1 - d.s0;
        }
        *(recv ? &u.recvs : &u.sends) = mode_u64(x, n);
    }
    free(x);
    return u;
}

static size_t nsends(const struct dir *d)
{
    return d->s1 - d->s0;
}

static size_t nrecvs(const struct dir *d)
{
    return d->r1 - d->r0;
}

/* The process that is rank `rank` of communicator comm, or NULL when it is not traced. */
static const struct icx_proc *proc_of(const struct icx_trace *t, uint64_t comm, int rank)
{
    for (size_t i = 0; i < t->nprocs; i++)
        for (size_t k = 0; k < t->procs[i]->nncomms; k++)
            if (t->procs[i]->ncomms[k].comm_id == comm && t->procs[i]->ncomms[k].rank == rank)
                return t->procs[i];
    return NULL;
}

static void who(char *buf, size_t len, const struct icx_proc *p, int rank)
{
    if (p)
        snprintf(buf, len, "rank %d (global %d, %s)", rank, p->rank, p->host ? p->host : "?");
    else
        snprintf(buf, len, "rank %d (untraced)", rank);
}

/* The highest collective call number process p entered on communicator comm before time t. */
static uint64_t coll_seq_before(const struct icx_proc *p, uint64_t comm, double t)
{
    uint64_t best = 0;
    for (size_t k = 0; p && k < p->nncalls; k++) {
        const struct icx_rd_ncall *c = &p->ncalls[k];
        if (c->t_enter >= t || icx_nccl_op_of(c->api) >= 8 || c->seq <= best)
            continue;
        const struct icx_rd_ncomm *cm = icx_nccl_comm_of(p, c->comm, c->t_enter);
        if (cm && cm->comm_id == comm)
            best = c->seq;
    }
    return best;
}

/* Did `short_side` go on past the point where `extra` (the other side's first call with no
 * partner) was made?  It entered a later collective of the communicator than the last one the
 * other side had entered before it; without collectives there, its trace ended with a flush.  A
 * rank that merely stopped earlier (a hang) is the hang rule's, not a pairing fault. */
static int went_on(const struct icx_proc *short_side, const struct pp *extra)
{
    if (!short_side)
        return 0;
    uint64_t k = coll_seq_before(extra->p, extra->comm, extra->enter);
    if (k == 0)
        return short_side->ended;
    return coll_seq_before(short_side, extra->comm, 1e300) > k;
}

/* The first size disagreement of direction d: 0 none, else 1 with *k the send's index. */
static int size_mismatch(const struct pp *v, const struct dir *d, size_t *k)
{
    for (size_t a = 0; a < nsends(d) && a < nrecvs(d); a++)
        if (v[d->s0 + a].bytes != v[d->r0 + a].bytes) {
            *k = a;
            return 1;
        }
    return 0;
}

/* One direction's finding, if it has one: 1 when added. */
static int check_dir(const struct icx_trace *t, const struct pp *v, const struct dir *d,
                     const struct usual *u, struct icx_findings *F)
{
    const struct pp *any = &v[d->s0 < d->s1 ? d->s0 : d->r0];
    const struct icx_proc *ps = proc_of(t, any->comm, any->src),
                          *pr = proc_of(t, any->comm, any->dst);
    char s[160], r[160], ev[1200];
    who(s, sizeof(s), ps, any->src);
    who(r, sizeof(r), pr, any->dst);
    size_t k;
    if (size_mismatch(v, d, &k)) {
        const struct pp *x = &v[d->s0 + k], *y = &v[d->r0 + k];
        snprintf(ev, sizeof(ev),
                 "send/receive #%llu from rank %d to rank %d on communicator %016llx: %s sent "
                 "%llu bytes, %s posted its receive for %llu; NCCL needs each receive to match "
                 "its send's size (it fails or hangs there)",
                 (unsigned long long)x->seq, x->src, x->dst, (unsigned long long)x->comm, s,
                 (unsigned long long)x->bytes, r, (unsigned long long)y->bytes);
        /* the side whose size is not the communicator's usual one (the receiver when both) */
        const struct icx_proc *odd = x->bytes != u->bytes || y->bytes == u->bytes ? x->p : y->p;
        odd = x->bytes != u->bytes && y->bytes != u->bytes ? y->p : odd;
        icx_finding_add(F, "collective_mismatch", odd, ev,
                        "post every receive with the count and type of the matching send");
        return 1;
    }
    size_t ns = nsends(d), nr = nrecvs(d);
    if (ns == nr)
        return 0;
    int more_sends = ns > nr;
    const struct pp *extra = &v[more_sends ? d->s0 + nr : d->r0 + ns]; /* the first unmatched */
    const struct icx_proc *short_side = more_sends ? pr : ps;
    if (!went_on(short_side, extra))
        return 0;
    /* the side whose count is not the communicator's usual one; the short side when unclear */
    int odd_s = ns != u->sends, odd_r = nr != u->recvs;
    int blame_recv = more_sends ? odd_r || !odd_s : odd_r && !odd_s;
    snprintf(ev, sizeof(ev),
             "on communicator %016llx %s sent %zu message%s to rank %d, which posted %zu "
             "receive%s from rank %d (most pairs of ranks there: %zu and %zu): %s #%llu (%llu "
             "bytes) has no %s%s; sends and receives between two ranks pair up in order, so "
             "every later message between them is off by one",
             (unsigned long long)any->comm, s, ns, ns == 1 ? "" : "s", any->dst, nr,
             nr == 1 ? "" : "s", any->src, (size_t)u->sends, (size_t)u->recvs,
             more_sends ? "send" : "receive", (unsigned long long)extra->seq,
             (unsigned long long)extra->bytes, more_sends ? "receive" : "send",
             extra->unfinished ? "; it is still waiting for one" : "");
    const struct icx_proc *named = blame_recv ? pr : ps;
    icx_finding_add(F, "collective_mismatch", named ? named : extra->p, ev,
                    "make every send have its receive on the peer, in the same order: look for "
                    "a rank-conditional send or receive, or an uneven last batch");
    return 1;
}

void icx_nccl_p2p_pairs(const struct icx_trace *t, struct icx_nccl *N, struct icx_findings *F)
{
    (void)N;
    size_t n;
    struct pp *v = collect_p2p(t, &n);
    for (size_t i = 0; i < n;) {
        size_t end = i;
        while (end < n && v[end].comm == v[i].comm)
            end++;
        struct usual u = usual_of(v, i, end);
        for (size_t a = i; a < end;) {
            size_t b = dir_end(v, end, a);
            struct dir d = dir_at(v, a, b);
            if (check_dir(t, v, &d, &u, F))
                break; /* one finding per communicator */
            a = b;
        }
        i = end;
    }
    free(v);
}
