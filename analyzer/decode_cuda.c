/* Decoding of the CUDA records: devices and links, GPU spans, stack references and the events of
 * the CUDA hooks -- peer copies, allocations, host copies, pinned buffers (trace_format.h sections
 * 6, 8, 9). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"

/* An event of the CUDA hooks (the reader checked it is inside a block). */
static void cuda_event(struct icx_proc *p, const struct icx_rec *r, size_t size,
                       struct icx_decode_ctx *ctx)
{
    ctx->last_copy = 0;
    struct icx_rd_thread *th = icx_thread_get(p, ctx->tid);
    if (th)
        th->cuda_events++;
    if (r->type == ICX_REC_CUDA_HOST_COPY) {
        if (size >= sizeof(struct icx_rec_cuda_host_copy) &&
            !icx_grow((void **)&p->hcopies, &p->cap_hcopies, p->nhcopies, sizeof(*p->hcopies))) {
            const struct icx_rec_cuda_host_copy *h = (const void *)r;
            p->hcopies[p->nhcopies++] =
                (struct icx_host_copy){h->host_ptr, h->bytes, h->device, h->result,
                                       ((r->aux >> ICX_EVF_SHIFT) & ICX_EVF_D2H) != 0};
        }
    } else if (r->type == ICX_REC_HOST_ALLOC || r->type == ICX_REC_HOST_FREE) {
        /* their NUMA placement comes in HOST_NUMA records */
    } else if (r->type == ICX_REC_CUDA_ALLOC) {
        p->nallocs++;
        const struct icx_rec_cuda_alloc *a = (const void *)r;
        if (size >= sizeof(*a) && a->result == 0 && a->device >= 0 && a->device < ICX_RD_MAX_DEV)
            p->alloc_bytes[a->device] += a->bytes;
    } else if (r->type == ICX_REC_CUDA_FREE) {
        p->nfrees++;
    } else if (size >= sizeof(struct icx_rec_cuda_copy) &&
               !icx_grow((void **)&p->copies, &p->cap_copies, p->ncopies, sizeof(*p->copies))) {
        const struct icx_rec_cuda_copy *c = (const void *)r;
        struct icx_copy *o = &p->copies[p->ncopies++];
        memset(o, 0, sizeof(*o));
        o->api = r->aux & 0xffff;
        o->flags = r->aux >> ICX_EVF_SHIFT;
        o->tid = ctx->tid;
        o->src = c->src_dev;
        o->dst = c->dst_dev;
        o->result = c->result;
        o->copy_id = c->copy_id;
        o->bytes = c->bytes;
        o->stream = c->stream;
        o->ts = ctx->ts;
        o->dur = (int64_t)c->e.dur;
        ctx->last_copy = p->ncopies;
    }
}

void icx_decode_cuda(struct icx_proc *p, const struct icx_rec *r, size_t size,
                     struct icx_decode_ctx *ctx)
{
    switch (r->type) {
    case ICX_REC_DEVICE:
        /* 1.0 wrote 24 bytes; 1.1 appended local_cpus. */
        if (size >= ICX_REC_DEVICE_V10_SIZE && r->aux < ICX_RD_MAX_DEV) {
            const struct icx_rec_device *x = (const void *)r;
            struct icx_rd_device *dv = &p->dev[r->aux];
            dv->present = 1;
            snprintf(dv->name, sizeof(dv->name), "%s", icx_proc_string(p, x->name));
            snprintf(dv->bus, sizeof(dv->bus), "%s", icx_proc_string(p, x->pci_bus_id));
            dv->numa = icx_node_or_unknown(x->numa_node);
            if (size >= sizeof(struct icx_rec_device))
                snprintf(dv->local_cpus, sizeof(dv->local_cpus), "%s",
                         icx_proc_string(p, x->local_cpus));
        }
        break;
    case ICX_REC_LINK:
        if (size >= sizeof(struct icx_rec_link) &&
            !icx_grow((void **)&p->links, &p->cap_links, p->nlinks, sizeof(*p->links))) {
            const struct icx_rec_link *x = (const void *)r;
            p->links[p->nlinks++] = (struct icx_rd_link){x->src_dev, x->dst_dev, r->aux,
                                                         x->nlinks,  x->flags,   x->capacity_bps};
        }
        break;
    case ICX_REC_GPU_SPAN:
        if (size >= sizeof(struct icx_rec_gpu_span) &&
            !icx_grow((void **)&p->spans, &p->cap_spans, p->nspans, sizeof(*p->spans))) {
            const struct icx_rec_gpu_span *x = (const void *)r;
            p->spans[p->nspans++] = (struct icx_span){x->copy_id, x->flags, x->start_ns, x->end_ns};
        }
        break;
    case ICX_REC_STACK_REF:
        if (ctx->last_copy && ctx->last_copy <= p->ncopies)
            p->copies[ctx->last_copy - 1].stack_id = r->aux;
        else if (ctx->last_ncall && ctx->last_ncall <= p->nncalls)
            p->ncalls[ctx->last_ncall - 1].stack_id = r->aux;
        break;
    case ICX_REC_CUDA_COPY:
    case ICX_REC_CUDA_ALLOC:
    case ICX_REC_CUDA_FREE:
    case ICX_REC_CUDA_HOST_COPY:
    case ICX_REC_HOST_ALLOC:
    case ICX_REC_HOST_FREE: cuda_event(p, r, size, ctx); break;
    default: break;
    }
}

static int span_cmp(const void *a, const void *b)
{
    uint32_t x = ((const struct icx_span *)a)->copy_id, y = ((const struct icx_span *)b)->copy_id;
    return x < y ? -1 : x > y;
}

static void match_spans(struct icx_proc *p)
{
    if (p->nspans > 1)
        qsort(p->spans, p->nspans, sizeof(*p->spans), span_cmp);
    for (size_t i = 0; i < p->ncopies; i++) {
        struct icx_copy *c = &p->copies[i];
        const struct icx_span *s = icx_span_find(p, c->copy_id);
        if (s && !s->flags && s->end_ns >= s->start_ns) {
            c->gpu_start = (double)s->start_ns / 1e9;
            c->gpu_end = (double)s->end_ns / 1e9;
        }
    }
}

/* Copies on the monotonic timeline (they extend the process's covered time), matched to their
 * GPU spans. */
void icx_decode_cuda_finish(struct icx_proc *p)
{
    double lo = p->t_last >= p->t_first && p->nclocks ? p->t_first : 1e300;
    double hi = p->t_last >= p->t_first && p->nclocks ? p->t_last : -1e300;
    for (size_t i = 0; i < p->ncopies; i++) {
        struct icx_copy *c = &p->copies[i];
        c->t_enter = icx_proc_seconds(p, c->ts);
        c->t_exit = c->t_enter + p->slope * (double)c->dur / 1e9;
        lo = c->t_enter < lo ? c->t_enter : lo;
        hi = c->t_exit > hi ? c->t_exit : hi;
    }
    p->t_first = lo <= hi ? lo : 0;
    p->t_last = lo <= hi ? hi : 0;
    match_spans(p);
}
