/* Decoding of the NCCL records (formats 1.2-1.3, trace_format.h section 11). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"

/* One part of an NCCL_DUMP: part 0 starts a text (of kind and communicator), later parts extend
 * it up to its announced size; debug lines (kind 3) come in chunks over time, kept as one text. */
static void dump_part(struct icx_proc *p, const struct icx_rec *r, size_t size, const char *part);

/* NCCL's profiler events (section 13). */
static void decode_prof(struct icx_proc *p, const struct icx_rec *r, size_t size, int64_t ts)
{
    if (r->type == ICX_REC_NCCL_PCOMM && size >= sizeof(struct icx_rec_nccl_pcomm) &&
        !icx_grow((void **)&p->pcomms, &p->cap_pcomms, p->npcomms, sizeof(*p->pcomms))) {
        const struct icx_rec_nccl_pcomm *x = (const void *)r;
        p->pcomms[p->npcomms++] =
            (struct icx_rd_pcomm){r->aux,     x->nccl_comm_id, x->rank, x->nranks, x->nnodes,
                                  x->version, x->chained,      x->mask, 0,         0};
    } else if (r->type == ICX_REC_NCCL_PCOLL && size >= sizeof(struct icx_rec_nccl_pcoll) &&
               !icx_grow((void **)&p->pcolls, &p->cap_pcolls, p->npcolls, sizeof(*p->pcolls))) {
        const struct icx_rec_nccl_pcoll *x = (const void *)r;
        struct icx_rd_pcoll *c = &p->pcolls[p->npcolls++];
        memset(c, 0, sizeof(*c));
        c->ctx = x->ctx;
        c->root = x->root;
        c->seq = x->seq;
        c->count = x->count;
        c->nchannels = x->nchannels;
        c->nwarps = x->nwarps;
        memcpy(c->func, x->func, 15); /* the 16th byte stays 0 whatever the file says */
        memcpy(c->algo, x->algo, 15);
        memcpy(c->proto, x->proto, 15);
        c->ts = ts;
        c->dur = (int64_t)x->e.dur;
    } else if (r->type == ICX_REC_NCCL_PPROXY && size >= sizeof(struct icx_rec_nccl_pproxy)) {
        const struct icx_rec_nccl_pproxy *x = (const void *)r;
        struct icx_rd_pproxy v = {r->aux,   x->peer,  x->channel,     x->is_send,      x->ops,
                                  x->steps, x->bytes, x->gpu_wait_ns, x->peer_wait_ns, x->net_ns};
        for (size_t i = p->npproxies; i-- > 0;) /* cumulative: the later record replaces */
            if (p->pproxies[i].ctx == v.ctx && p->pproxies[i].peer == v.peer &&
                p->pproxies[i].channel == v.channel && p->pproxies[i].is_send == v.is_send) {
                p->pproxies[i] = v;
                return;
            }
        if (!icx_grow((void **)&p->pproxies, &p->cap_pproxies, p->npproxies, sizeof(*p->pproxies)))
            p->pproxies[p->npproxies++] = v;
    } else if (r->type == ICX_REC_NCCL_PKCH && size >= sizeof(struct icx_rec_nccl_pkch) &&
               !icx_grow((void **)&p->pkchs, &p->cap_pkchs, p->npkchs, sizeof(*p->pkchs))) {
        const struct icx_rec_nccl_pkch *x = (const void *)r;
        p->pkchs[p->npkchs++] =
            (struct icx_rd_pkch){x->ctx, x->channel, x->seq, x->gpu_start, x->gpu_stop};
    }
}

void icx_decode_nccl(struct icx_proc *p, const struct icx_rec *r, size_t size,
                     struct icx_decode_ctx *ctx)
{
    int64_t ts = ctx->ts;
    uint32_t tid = ctx->tid;
    if (r->type == ICX_REC_NCCL_PCOMM || r->type == ICX_REC_NCCL_PCOLL ||
        r->type == ICX_REC_NCCL_PKCH || r->type == ICX_REC_NCCL_PPROXY) {
        decode_prof(p, r, size, ts);
    } else if (r->type == ICX_REC_NCCL_DUMP) {
        if (size >= ICX_NCCL_DUMP_SIZE_1_2 && r->aux >= 1 && r->aux <= 3)
            dump_part(p, r, size, icx_proc_string(p, ((const struct icx_rec_nccl_dump *)r)->text));
    } else if (r->type == ICX_REC_NCCL_COMM && size >= sizeof(struct icx_rec_nccl_comm) &&
               ((const struct icx_rec_nccl_comm *)r)->nranks <= ICX_RD_MAX_NRANKS &&
               !icx_grow((void **)&p->ncomms, &p->cap_ncomms, p->nncomms, sizeof(*p->ncomms))) {
        const struct icx_rec_nccl_comm *x = (const void *)r;
        p->ncomms[p->nncomms++] =
            (struct icx_rd_ncomm){r->aux & 0xffff, x->comm,   x->comm_id, x->parent_id, x->rank,
                                  x->nranks,       x->device, x->result,  ts,           0};
    } else if (r->type == ICX_REC_NCCL_CALL && size >= ICX_NCCL_CALL_SIZE_1_2 &&
               !icx_grow((void **)&p->ncalls, &p->cap_ncalls, p->nncalls, sizeof(*p->ncalls))) {
        const struct icx_rec_nccl_call *x = (const void *)r;
        struct icx_rd_ncall *c = &p->ncalls[p->nncalls++];
        memset(c, 0, sizeof(*c));
        c->api = r->aux & 0xffff;
        c->pending = ((r->aux >> ICX_EVF_SHIFT) & ICX_EVF_PENDING) != 0;
        c->tid = tid;
        c->group = x->group;
        c->comm = x->comm;
        c->count = x->count;
        c->bytes = x->bytes;
        c->stream = x->stream;
        c->seq = x->seq;
        c->peer = x->peer;
        c->result = x->result;
        c->dtype = x->dtype;
        c->redop = x->redop;
        c->ts = ts;
        c->dur = (int64_t)x->e.dur;
        c->gpu_id = size >= sizeof(*x) ? x->gpu_id : 0;
        ctx->last_ncall = p->nncalls; /* its STACK_REF may follow */
    }
}

static void dump_part(struct icx_proc *p, const struct icx_rec *r, size_t size, const char *part)
{
    const struct icx_rec_nccl_dump *x = (const void *)r;
    int kind = (int)r->aux;
    uint64_t comm = size >= sizeof(*x) ? x->comm_id : 0;
    struct icx_rd_dump *d = NULL;
    for (size_t i = p->ndumps; i-- > 0 && !d;)
        if (p->dumps[i].kind == kind)
            d = &p->dumps[i];
    if (kind != 3 && x->part == 0)
        d = NULL; /* a new text */
    if (!d) {
        if (kind != 3 && x->part != 0)
            return; /* a continuation whose start was lost */
        if (icx_grow((void **)&p->dumps, &p->cap_dumps, p->ndumps, sizeof(*p->dumps)))
            return;
        d = &p->dumps[p->ndumps++];
        *d = (struct icx_rd_dump){kind, comm, NULL};
    }
    size_t have = d->text ? strlen(d->text) : 0, add = strlen(part);
    if (kind == 3 ? have + add >= (16u << 20) : have + add > x->total_bytes)
        return;
    char *n = realloc(d->text, have + add + 1);
    if (n) {
        memcpy(n + have, part, add + 1);
        d->text = n;
    }
}

struct group_span {
    uint32_t group, gpu_id;
};

static int group_cmp(const void *a, const void *b)
{
    uint32_t x = ((const struct group_span *)a)->group, y = ((const struct group_span *)b)->group;
    return x < y ? -1 : x > y;
}

/* A call's GPU state from its span(s): the union of the spans with its id (a group timed on
 * several streams), unfinished if any of them is. */
static void gpu_state(const struct icx_proc *p, struct icx_rd_ncall *c)
{
    const struct icx_span *s = icx_span_find(p, c->gpu_id);
    if (!c->gpu_id) {
        c->gpu = ICX_GPU_UNTIMED;
        return;
    }
    if (!s) {
        c->gpu = ICX_GPU_UNKNOWN;
        return;
    }
    c->gpu = ICX_GPU_DONE;
    c->gpu_start = c->gpu_end = 0;
    for (; s < p->spans + p->nspans && s->copy_id == c->gpu_id; s++) {
        int st = s->flags & ICX_SPAN_NO_START ? ICX_GPU_QUEUED
                 : s->flags & ICX_SPAN_NO_END ? ICX_GPU_RUNNING
                                              : ICX_GPU_DONE;
        if (st == ICX_GPU_RUNNING || (st == ICX_GPU_QUEUED && c->gpu == ICX_GPU_DONE))
            c->gpu = st;
        double a = (double)s->start_ns / 1e9, b = (double)s->end_ns / 1e9;
        if (st != ICX_GPU_QUEUED && (c->gpu_start == 0 || a < c->gpu_start))
            c->gpu_start = a;
        if (st == ICX_GPU_DONE && b > c->gpu_end)
            c->gpu_end = b;
    }
}

/* ---- joining NCCL's profiler events to the API calls ---- */

/* NCCL's name of an API collective, as its profiler descriptors carry it; NULL: not one. */
static const char *prof_func_of(unsigned api)
{
    switch (api) {
    case ICX_API_ncclAllReduce: return "AllReduce";
    case ICX_API_ncclBroadcast:
    case ICX_API_ncclBcast: return "Broadcast";
    case ICX_API_ncclReduce: return "Reduce";
    case ICX_API_ncclAllGather: return "AllGather";
    case ICX_API_ncclReduceScatter: return "ReduceScatter";
    case ICX_API_ncclAlltoAll: return "AllToAll";
    case ICX_API_ncclGather: return "Gather";
    case ICX_API_ncclScatter: return "Scatter";
    default: return NULL;
    }
}

struct call_key {
    uint64_t comm, seq;
    size_t i;
};

static int call_key_cmp(const void *a, const void *b)
{
    const struct call_key *x = a, *y = b;
    if (x->comm != y->comm)
        return x->comm < y->comm ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The API call of handle `comm` that profiler collective c is (NCCL's seqNumber counts from 0,
 * the tracer's from 1), or NULL. */
static struct icx_rd_ncall *prof_call(struct icx_proc *p, const struct call_key *keys, size_t n,
                                      uint64_t comm, const struct icx_rd_pcoll *c)
{
    struct call_key k = {comm, c->seq + 1, 0};
    const struct call_key *f = bsearch(&k, keys, n, sizeof(*keys), call_key_cmp);
    if (!f)
        return NULL;
    struct icx_rd_ncall *x = &p->ncalls[f->i];
    const char *fn = prof_func_of(x->api);
    return fn && !strcmp(fn, c->func) && x->count == c->count ? x : NULL;
}

/* Each profiler context is the API communicator of the same rank and size whose calls its
 * collectives match best (function, count, sequence number): NCCL's commId is its own hash, not
 * the tracer's id, and a process may hold several communicators of one shape. */
static void prof_join(struct icx_proc *p)
{
    for (size_t i = 0; i < p->npcolls; i++)
        p->pcolls[i].t = icx_proc_seconds(p, p->pcolls[i].ts);
    if (!p->npcomms || !p->nncalls)
        return;
    struct call_key *keys = malloc(sizeof(*keys) * p->nncalls);
    if (!keys)
        return; /* unjoined: reported without the API's bytes */
    size_t n = 0;
    for (size_t i = 0; i < p->nncalls; i++)
        if (!p->ncalls[i].pending && prof_func_of(p->ncalls[i].api))
            keys[n++] = (struct call_key){p->ncalls[i].comm, p->ncalls[i].seq, i};
    qsort(keys, n, sizeof(*keys), call_key_cmp);
    for (size_t k = 0; k < p->npcomms; k++) {
        struct icx_rd_pcomm *pc = &p->pcomms[k];
        size_t best = SIZE_MAX, best_score = 0;
        for (size_t m = 0; m < p->nncomms; m++) {
            const struct icx_rd_ncomm *cm = &p->ncomms[m];
            if (!cm->comm || cm->rank != pc->rank || cm->nranks != pc->nranks)
                continue;
            size_t score = 0;
            for (size_t i = 0; i < p->npcolls; i++)
                score += p->pcolls[i].ctx == pc->ctx &&
                         prof_call(p, keys, n, cm->comm, &p->pcolls[i]) != NULL;
            if (score > best_score) {
                best_score = score;
                best = m;
            }
        }
        if (best == SIZE_MAX)
            continue;
        pc->comm = p->ncomms[best].comm;
        pc->comm_id = p->ncomms[best].comm_id;
        for (size_t i = 0; i < p->npcolls; i++) {
            struct icx_rd_ncall *x =
                p->pcolls[i].ctx == pc->ctx ? prof_call(p, keys, n, pc->comm, &p->pcolls[i]) : NULL;
            if (x)
                p->pcolls[i].bytes = x->bytes;
        }
    }
    free(keys);
}

void icx_decode_nccl_finish(struct icx_proc *p)
{
    for (size_t i = 0; i < p->nncomms; i++)
        p->ncomms[i].t = icx_proc_seconds(p, p->ncomms[i].ts);
    for (size_t i = 0; i < p->nncalls; i++) {
        struct icx_rd_ncall *c = &p->ncalls[i];
        c->t_enter = icx_proc_seconds(p, c->ts);
        c->t_exit = c->t_enter + p->slope * (double)c->dur / 1e9;
    }
    /* Calls in a group take the span of their group's ncclGroupEnd (group ids are unique in a
     * process). */
    size_t ng = 0;
    struct group_span *g = malloc(sizeof(*g) * (p->nncalls + 1));
    for (size_t i = 0; g && i < p->nncalls; i++)
        if (p->ncalls[i].api == ICX_API_ncclGroupEnd && !p->ncalls[i].pending &&
            p->ncalls[i].group && p->ncalls[i].gpu_id)
            g[ng++] = (struct group_span){p->ncalls[i].group, p->ncalls[i].gpu_id};
    if (ng > 1)
        qsort(g, ng, sizeof(*g), group_cmp);
    for (size_t i = 0; i < p->nncalls; i++) {
        struct icx_rd_ncall *c = &p->ncalls[i];
        if (c->group && !c->gpu_id && c->api != ICX_API_ncclGroupEnd && ng) {
            struct group_span key = {c->group, 0};
            const struct group_span *f = bsearch(&key, g, ng, sizeof(*g), group_cmp);
            if (f)
                c->gpu_id = f->gpu_id;
        }
        gpu_state(p, c);
    }
    free(g);
    prof_join(p);
}
